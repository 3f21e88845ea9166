#include "login_server/worker.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cassert>

namespace asio = boost::asio;

namespace imhash {

using client::Status;
using namespace frame;

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string group_key(const ServerInfo& s) {
  return s.name + "|" + s.address + "|" + std::to_string(s.shards);
}

// Receive buffers: datagrams larger than this arrive truncated and are answered BAD_REQUEST.
constexpr size_t kDatagramBuffer = 2048;
// Bursts read per wake-up before giving the links their turn.
constexpr int kReceiveRounds = 8;

}  // namespace

Worker::Worker(uint32_t index, const WorkerSettings& settings, TableSource* tables)
    : index_(index), settings_(settings), tables_(tables), tick_timer_(ctx_) {}

Worker::~Worker() { join(); }

void Worker::start(int udp_fd, asio::ip::udp protocol) {
  udp_.emplace(ctx_, protocol, udp_fd);
  asio::co_spawn(ctx_, receive_loop(), asio::detached);
  schedule_tick();
  thread_ = std::thread([this] { ctx_.run(); });
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::set_router(std::shared_ptr<const Router> router) {
  asio::post(ctx_, [this, router = std::move(router)]() mutable { install(std::move(router)); });
}

void Worker::when_links_tried(std::function<void()> done) {
  asio::post(ctx_, [this, done = std::move(done)]() mutable {
    links_tried_ = std::move(done);
    check_links_tried();
  });
}

void Worker::check_links_tried() {
  if (!links_tried_) return;
  for (const auto& g : groups_) {
    for (const auto& l : g.shards) {
      if (!l->first_attempt_done()) return;
    }
  }
  auto done = std::move(links_tried_);
  links_tried_ = nullptr;
  done();
}

void Worker::stop() {
  asio::post(ctx_, [this] {
    stopping_ = true;
    // Stop reading; the socket stays open until what is in flight has been answered.
    boost::system::error_code ec;
    if (udp_) udp_->cancel(ec);
  });
}

void Worker::install(std::shared_ptr<const Router> router) {
  if (!router || (router_ && router->version() <= router_->version())) return;
  // Keep the links of servers that did not change; open links to new ones; retire the rest once
  // what they carry is answered (requests in flight finish on the version they started with).
  std::vector<LinkGroup> next;
  const auto& servers = router->table().servers;
  for (const ServerInfo& s : servers) {
    const std::string key = group_key(s);
    auto it = std::find_if(groups_.begin(), groups_.end(),
                           [&](const LinkGroup& g) { return g.key == key && !g.shards.empty(); });
    if (it != groups_.end()) {
      next.push_back(std::move(*it));
      it->shards.clear();
      continue;
    }
    LinkGroup g{key, {}};
    for (uint32_t shard = 0; shard < s.shards; ++shard) {
      g.shards.push_back(std::make_unique<HashLink>(ctx_, *this, settings_.link, s, shard,
                                                    (uint64_t{index_} << 32) ^ shard ^
                                                        std::hash<std::string>{}(key)));
      g.shards.back()->start();
    }
    next.push_back(std::move(g));
  }
  for (auto& g : groups_) {
    for (auto& l : g.shards) {
      if (l->in_flight() == 0) l->close();
      retired_.push_back(std::move(l));
    }
  }
  groups_ = std::move(next);
  router_ = std::move(router);
  spdlog::debug("worker {}: table version {}", index_, router_->version());
}

void Worker::schedule_tick() {
  tick_timer_.expires_after(settings_.tick);
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    const int64_t now = now_ns();
    for (auto& g : groups_) {
      for (auto& l : g.shards) l->tick(now);
    }
    for (auto& l : retired_) {
      l->tick(now);
      if (l->in_flight() == 0) l->close();
    }
    std::erase_if(retired_, [](const auto& l) { return l->finished(); });
    flush_replies();
    check_links_tried();
    if (stopping_ && in_flight() == 0) {
      // Everything answered: close the links; the io_context then runs out of work.
      for (auto& g : groups_) {
        for (auto& l : g.shards) l->close();
      }
      for (auto& l : retired_) l->close();
      boost::system::error_code ec;
      if (udp_) udp_->close(ec);
      return;
    }
    schedule_tick();
  });
}

uint32_t Worker::in_flight() const {
  uint32_t n = 0;
  for (const auto& g : groups_) {
    for (const auto& l : g.shards) n += l->in_flight();
  }
  for (const auto& l : retired_) n += l->in_flight();
  return n;
}

asio::awaitable<void> Worker::receive_loop() {
  std::vector<uint8_t> storage(kBatch * kDatagramBuffer);
  std::array<mmsghdr, kBatch> msgs{};
  std::array<iovec, kBatch> iov{};
  std::array<ClientAddr, kBatch> from{};
  const int fd = udp_->native_handle();
  for (;;) {
    auto [ec] = co_await udp_->async_wait(asio::ip::udp::socket::wait_read,
                                          asio::as_tuple(asio::use_awaitable));
    if (ec || stopping_) co_return;
    for (int round = 0; round < kReceiveRounds; ++round) {
      for (size_t i = 0; i < kBatch; ++i) {
        iov[i] = {storage.data() + i * kDatagramBuffer, kDatagramBuffer};
        msgs[i].msg_hdr = {};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &from[i].u;
        msgs[i].msg_hdr.msg_namelen = sizeof(from[i].u);
      }
      const int n = recvmmsg(fd, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) break;
      const int64_t now = now_ns();
      for (int i = 0; i < n; ++i) {
        from[i].len = msgs[i].msg_hdr.msg_namelen;
        handle_datagram(storage.data() + i * kDatagramBuffer, msgs[i].msg_len, from[i], now);
      }
      flush_links();
      flush_replies();
      if (n < static_cast<int>(kBatch)) break;
    }
  }
}

void Worker::handle_datagram(const uint8_t* data, size_t size, const ClientAddr& from,
                             int64_t now) {
  ++counters_.received;
  uint8_t reply_buf[client::kMinDatagram];
  const Plan plan = plan_request({data, size}, from.endpoint(),
                                 router_ ? router_->version() : 0, reply_buf);
  switch (plan.kind) {
    case Plan::kDrop:
      ++counters_.dropped[static_cast<size_t>(plan.drop)];
      return;
    case Plan::kReply:
      reply(from, reply_buf, plan.reply_size, plan.status);
      return;
    case Plan::kForward:
      forward(InFlight{plan.ask, from, plan.frame_type, 0}, now);
      return;
  }
}

void Worker::forward(InFlight request, int64_t now) {
  if (!router_) {
    uint8_t buf[client::kHeaderSize];
    reply(request.client, buf, reply_with_status(request.ask, Status::kUnavailable, buf),
          Status::kUnavailable);
    return;
  }
  const Route route = router_->route(request.ask.user_id);
  HashLink* link = groups_[route.server].shards[route.shard].get();
  if (!link->up() || link->full()) {
    // Down, or as many requests in flight as we allow: fail fast rather than queue without bound.
    uint8_t buf[client::kHeaderSize];
    reply(request.client, buf, reply_with_status(request.ask, Status::kUnavailable, buf),
          Status::kUnavailable);
    return;
  }
  ++counters_.forwarded;
  if (link->submit(std::move(request), router_->version(), now)) dirty_.push_back(link);
}

void Worker::on_answer(InFlight& request, const Response& response) {
  if (response.status == FrameStatus::kMoved) {
    // The hash server has a newer table: take it and retry once (DESIGN §2).
    if (tables_ && response.table_version > (router_ ? router_->version() : 0)) {
      install(tables_->refresh());
    }
    if (request.attempts == 0 && router_ && router_->version() >= response.table_version) {
      ++counters_.moved_retries;
      request.attempts = 1;
      forward(std::move(request), now_ns());
      return;
    }
    spdlog::warn("worker {}: MOVED to version {} but no newer table is at hand (have {})", index_,
                 response.table_version, router_ ? router_->version() : 0);
  }
  uint8_t buf[client::kMinDatagram];
  Status status;
  const size_t n = reply_from_response(request.ask, response, buf, status);
  reply(request.client, buf, n, status);
}

void Worker::on_failure(InFlight& request, Status status) {
  uint8_t buf[client::kHeaderSize];
  reply(request.client, buf, reply_with_status(request.ask, status, buf), status);
}

void Worker::after_link_io() {
  flush_links();
  flush_replies();
}

void Worker::reply(const ClientAddr& to, const uint8_t* data, size_t size, Status status) {
  ++counters_.replies_by_status[static_cast<uint8_t>(status) & 7];
  if (size == 0) return;
  OutSlot& slot = out_[out_count_++];
  slot.to = to;
  std::memcpy(slot.data, data, size);
  slot.size = size;
  if (out_count_ == kBatch) flush_replies();
}

void Worker::flush_replies() {
  if (out_count_ == 0 || !udp_ || !udp_->is_open()) {
    out_count_ = 0;
    return;
  }
  std::array<mmsghdr, kBatch> msgs{};
  std::array<iovec, kBatch> iov{};
  for (size_t i = 0; i < out_count_; ++i) {
    iov[i] = {out_[i].data, out_[i].size};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &out_[i].to.u;
    msgs[i].msg_hdr.msg_namelen = out_[i].to.len;
  }
  size_t sent = 0;
  while (sent < out_count_) {
    const int n = sendmmsg(udp_->native_handle(), msgs.data() + sent,
                           static_cast<unsigned>(out_count_ - sent), MSG_DONTWAIT);
    if (n <= 0) {
      // Socket buffer full or a bad address: UDP gives no promise, the client retries. Skip one.
      ++counters_.send_failures;
      ++sent;
      continue;
    }
    sent += static_cast<size_t>(n);
  }
  out_count_ = 0;
}

void Worker::flush_links() {
  for (HashLink* l : dirty_) l->flush();
  dirty_.clear();
}

}  // namespace imhash
