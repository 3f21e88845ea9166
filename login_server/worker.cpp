#include "login_server/worker.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <ctime>

#include "common/runtime/clock.h"
#include "common/runtime/event_loop.h"

namespace asio = boost::asio;

namespace imhash {

using client::Status;

namespace {

// Links are kept per server identity: a server whose address or shard count changed gets new ones.
bool same_server(const ServerInfo& a, const ServerInfo& b) {
  return a.name == b.name && a.address == b.address && a.shards == b.shards;
}

// Receive buffers: datagrams larger than this arrive truncated and are answered BAD_REQUEST.
constexpr size_t kDatagramBuffer = 2048;
// Bursts read per wake-up before giving the links their turn.
constexpr int kReceiveRounds = 8;

}  // namespace

Worker::Worker(uint32_t index, const WorkerSettings& settings)
    : index_(index),
      settings_(settings),
      tick_timer_(ctx_),
      flow_(settings.flow, *this, counters_) {}

Worker::~Worker() { join(); }

void Worker::start(int udp_fd, asio::ip::udp protocol) {
  flow_.set_wall_clock_offset(unix_minus_monotonic_ns());
  udp_.emplace(ctx_, protocol, udp_fd);
  asio::co_spawn(ctx_, receive_loop(), asio::detached);
  schedule_tick();
  thread_ = std::thread([this] {
    thread_check_.bind();
    run_event_loop(ctx_, settings_.idle_poll);
  });
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::set_routing(std::shared_ptr<const RoutingState> routing) {
  asio::post(ctx_, [this, routing = std::move(routing)]() mutable { install(std::move(routing)); });
}

void Worker::when_links_tried(std::function<void()> done) {
  asio::post(ctx_, [this, done = std::move(done)]() mutable {
    links_tried_ = std::move(done);
    check_links_tried();
  });
}

void Worker::check_links_tried() {
  // A newer table still warming counts too: the server announces the version it was brought to,
  // not the saved one it started from.
  if (!links_tried_ || !routing_ || pending_) return;
  for (const auto& g : groups_) {
    for (const auto& l : g.shards) {
      if (!l->first_attempt_done()) return;
    }
  }
  auto done = std::move(links_tried_);
  links_tried_ = nullptr;
  done();
}

void Worker::snapshot(std::function<void(Sample)> done) {
  asio::post(ctx_, [this, done = std::move(done)] {
    Sample s{counters_, {}};
    for (const auto& g : groups_) {
      for (const auto& l : g.shards) (l->up() ? s.counters.links_up : s.counters.links_down) += 1;
    }
    flow_.add_held_writes(s.held_writes);
    done(std::move(s));
  });
}

void Worker::stop() {
  asio::post(ctx_, [this] {
    stopping_ = true;
    // Stop reading; the socket stays open until what is in flight has been answered.
    boost::system::error_code ec;
    if (udp_) udp_->cancel(ec);
  });
}

// ---- tables and links ---------------------------------------------------------------------------

void Worker::install(std::shared_ptr<const RoutingState> routing) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  const uint64_t have = pending_ ? pending_->version() : (routing_ ? routing_->version() : 0);
  if (!routing || !routing->current) return;
  if (!pending_ && routing_ && routing->version() == have) {
    // The table we run with longer grace periods (TableSource::install): fallback reads and the
    // retired links that serve them go on.
    routing_ = std::move(routing);
    flow_.set_routing(routing_, monotonic_ns(), actions_);  // acts on nothing: see set_routing
    return;
  }
  if (routing->version() <= have) return;
  pending_ = std::move(routing);
  // Open links to servers we have none for. The new table takes effect only once each of them has
  // been tried, so a server joining the table is not reported UNAVAILABLE while it is dialled;
  // until then requests keep using the current table.
  for (const ServerInfo& s : pending_->current->table().servers) {
    auto has = [&](const LinkGroup& g) {
      return !g.shards.empty() && same_server(g.shards.front()->server(), s);
    };
    if (std::any_of(groups_.begin(), groups_.end(), has) ||
        std::any_of(warming_.begin(), warming_.end(), has)) {
      continue;
    }
    LinkGroup g;
    for (uint32_t shard = 0; shard < s.shards; ++shard) {
      // A server that comes back within the grace period gets its retired links back.
      auto old = std::find_if(retired_.begin(), retired_.end(), [&](const auto& l) {
        return l->state() != HashLink::State::kClosed && same_server(l->server(), s) &&
               l->shard() == shard;
      });
      if (old != retired_.end()) {
        g.shards.push_back(std::move(*old));
        retired_.erase(old);
        continue;
      }
      g.shards.push_back(std::make_unique<HashLink>(
          ctx_, *this, settings_.link, s, shard,
          (uint64_t{index_} << 32) ^ shard ^ std::hash<std::string>{}(s.name + s.address)));
      g.shards.back()->start();
    }
    warming_.push_back(std::move(g));
  }
  try_commit();
}

void Worker::try_commit() {
  if (!pending_) return;
  bool tried = true;
  for (const auto& g : warming_) {
    for (const auto& l : g.shards) tried = tried && l->first_attempt_done();
  }
  if (!table_takes_effect(pending_->version(), tried, servers_run_)) return;
  // Arrange the links like the new table's servers; links of servers that left are retired (they
  // finish what they carry, and serve fallback reads until the grace period ends).
  std::vector<LinkGroup> next;
  for (const ServerInfo& s : pending_->current->table().servers) {
    LinkGroup g;
    for (auto* pool : {&groups_, &warming_}) {
      for (auto& candidate : *pool) {
        if (g.shards.empty() && !candidate.shards.empty() &&
            same_server(candidate.shards.front()->server(), s)) {
          g.shards = std::move(candidate.shards);
          candidate.shards.clear();
        }
      }
    }
    next.push_back(std::move(g));
  }
  for (auto* pool : {&groups_, &warming_}) {
    for (auto& g : *pool) {
      for (auto& l : g.shards) retired_.push_back(std::move(l));
    }
  }
  warming_.clear();
  groups_ = std::move(next);
  routing_ = std::move(pending_);
  pending_.reset();
  spdlog::debug("worker {}: table version {}", index_, routing_->version());
  if (on_commit_) on_commit_(routing_->version());
  flow_.set_routing(routing_, monotonic_ns(), actions_);
  execute();
  flush_links();
  flush_replies();
}

HashLink* Worker::link_for(const LinkTarget& target) const {
  if (target.current != LinkTarget::kNotCurrent) {
    if (target.current >= groups_.size()) return nullptr;
    const auto& shards = groups_[target.current].shards;
    return target.shard < shards.size() ? shards[target.shard].get() : nullptr;
  }
  for (const auto& l : retired_) {
    if (l->shard() == target.shard && same_server(l->server(), *target.server)) return l.get();
  }
  return nullptr;
}

uint32_t Worker::room(const LinkTarget& target) const {
  const HashLink* link = link_for(target);
  return link ? link->room() : 0;
}

bool Worker::dialling(const LinkTarget& target) const {
  const HashLink* link = link_for(target);
  return link && link->state() == HashLink::State::kConnecting && !link->first_attempt_done();
}

uint32_t Worker::links_in_flight() const {
  uint32_t n = 0;
  for (const auto& g : groups_) {
    for (const auto& l : g.shards) n += l->in_flight();
  }
  for (const auto& l : retired_) n += l->in_flight();
  return n;
}

void Worker::schedule_tick() {
  tick_timer_.expires_after(settings_.tick);
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    const int64_t now = monotonic_ns();
    for (auto& g : groups_) {
      for (auto& l : g.shards) l->tick(now);
    }
    const bool in_grace = routing_ && now < routing_->grace_until_ns();
    for (auto& l : retired_) {
      l->tick(now);
      if (l->in_flight() == 0 && (!in_grace || stopping_)) l->close();
    }
    flow_.set_wall_clock_offset(unix_minus_monotonic_ns());  // follows a step of the clock
    flow_.tick(now, actions_);
    execute();
    for (const std::string& story : flow_.take_failure_reports()) {
      spdlog::warn("worker {}: {}", index_, story);
    }
    std::erase_if(retired_, [](const auto& l) { return l->finished(); });
    try_commit();
    flush_links();
    flush_replies();
    check_links_tried();
    if (stopping_ && flow_.active() == 0 && links_in_flight() == 0) {
      // Everything answered: close the links; the io_context then runs out of work.
      for (auto* pool : {&groups_, &warming_}) {
        for (auto& g : *pool) {
          for (auto& l : g.shards) l->close();
        }
      }
      for (auto& l : retired_) l->close();
      boost::system::error_code ec;
      if (udp_) udp_->close(ec);
      return;
    }
    schedule_tick();
  });
}

// ---- the data path ------------------------------------------------------------------------------

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
      const int64_t now = monotonic_ns();
      const auto unix_now = static_cast<uint32_t>(std::time(nullptr));
      for (int i = 0; i < n; ++i) {
        from[i].len = msgs[i].msg_hdr.msg_namelen;
        flow_.on_datagram({storage.data() + i * kDatagramBuffer, msgs[i].msg_len}, from[i], now,
                          unix_now, actions_);
        execute();
      }
      flush_links();
      flush_replies();
      if (n < static_cast<int>(kBatch)) break;
    }
  }
}

void Worker::execute() {
  // An action may lead to more (a frame that cannot be sent fails its request at once); they are
  // appended to actions_ and run in the same pass.
  if (executing_) return;
  executing_ = true;
  for (size_t i = 0; i < actions_.size(); ++i) {
    FlowAction& a = actions_[i];
    switch (a.kind) {
      case FlowAction::kSend: {
        HashLink* link = link_for(a.target);
        if (!link || !link->can_send()) {
          const uint64_t token = a.token;  // `a` may move when the failure appends its reply
          flow_.on_failure(token, Status::kUnavailable, monotonic_ns(), actions_);
          break;
        }
        if (link->submit(a.frame, a.token, monotonic_ns())) dirty_.push_back(link);
        break;
      }
      case FlowAction::kReply:
        reply(a.to, a.reply, a.reply_size, a.status);
        break;
      case FlowAction::kNeedTable:
        servers_run_ = std::max(servers_run_, a.version);
        if (on_stale_) on_stale_(a.version);
        break;
    }
  }
  actions_.clear();
  executing_ = false;
  // Not inside the loop above: a commit rearranges the links its sends were addressed to.
  if (pending_ && servers_run_ >= pending_->version()) try_commit();
}

void Worker::on_answer(uint64_t token, const frame::Response& response) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  flow_.on_answer(token, response, monotonic_ns(), actions_);
  execute();
}

void Worker::on_failure(uint64_t token, Status status) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  flow_.on_failure(token, status, monotonic_ns(), actions_);
  execute();
}

void Worker::on_settled(uint64_t token) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  flow_.on_settled(token);
}

void Worker::on_lost(uint64_t token) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  flow_.on_lost(token, monotonic_ns());  // held for its member: sent when the link is back
}

void Worker::on_late_answer(uint64_t token, const frame::Response& response) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  flow_.on_late_answer(token, response, monotonic_ns(), actions_);
  execute();
}

void Worker::after_link_io() {
  IMHASH_ON_OWNER_THREAD(on_thread());
  flush_links();
  flush_replies();
}

void Worker::reply(const ClientAddr& to, const uint8_t* data, size_t size, Status status) {
  ++counters_.replies_by_status[static_cast<uint8_t>(status) & (LoginCounters::kStatuses - 1)];
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
