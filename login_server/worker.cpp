#include "login_server/worker.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cassert>
#include <ctime>

#include "common/event_loop.h"

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
    : index_(index),
      settings_(settings),
      tables_(tables),
      tick_timer_(ctx_),
      token_mac_(settings.auth_key.empty() ? nullptr
                                           : std::make_unique<TokenMac>(settings.auth_key)),
      limiter_(settings.rate_limit) {}

Worker::~Worker() { join(); }

void Worker::start(int udp_fd, asio::ip::udp protocol) {
  udp_.emplace(ctx_, protocol, udp_fd);
  asio::co_spawn(ctx_, receive_loop(), asio::detached);
  schedule_tick();
  thread_ = std::thread([this] { run_event_loop(ctx_, settings_.idle_poll); });
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
  if (!links_tried_ || !routing_) return;
  for (const auto& g : groups_) {
    for (const auto& l : g.shards) {
      if (!l->first_attempt_done()) return;
    }
  }
  auto done = std::move(links_tried_);
  links_tried_ = nullptr;
  done();
}

void Worker::snapshot(std::function<void(WorkerCounters)> done) {
  asio::post(ctx_, [this, done = std::move(done)] {
    WorkerCounters c = counters_;
    for (const auto& g : groups_) {
      for (const auto& l : g.shards) (l->up() ? c.links_up : c.links_down) += 1;
    }
    done(c);
  });
}

WorkerCounters& WorkerCounters::operator+=(const WorkerCounters& o) {
  received += o.received;
  forwarded += o.forwarded;
  moved_retries += o.moved_retries;
  fallback_reads += o.fallback_reads;
  fallback_hits += o.fallback_hits;
  read_repairs += o.read_repairs;
  send_failures += o.send_failures;
  links_up += o.links_up;
  links_down += o.links_down;
  latency_sum_s += o.latency_sum_s;
  for (size_t i = 0; i < std::size(replies_by_status); ++i)
    replies_by_status[i] += o.replies_by_status[i];
  for (size_t i = 0; i < std::size(dropped); ++i) dropped[i] += o.dropped[i];
  for (size_t i = 0; i < kLatencyBuckets; ++i) latency[i] += o.latency[i];
  return *this;
}

void Worker::record_latency(const InFlight& request) {
  if (request.received_ns == 0) return;
  const double s = static_cast<double>(now_ns() - request.received_ns) / 1e9;
  size_t i = 0;
  while (i < std::size(WorkerCounters::kLatencyBounds) && s > WorkerCounters::kLatencyBounds[i]) {
    ++i;
  }
  ++counters_.latency[i];
  counters_.latency_sum_s += s;
}

void Worker::stop() {
  asio::post(ctx_, [this] {
    stopping_ = true;
    // Stop reading; the socket stays open until what is in flight has been answered.
    boost::system::error_code ec;
    if (udp_) udp_->cancel(ec);
  });
}

void Worker::install(std::shared_ptr<const RoutingState> routing) {
  const uint64_t have = pending_ ? pending_->version() : (routing_ ? routing_->version() : 0);
  if (!routing || !routing->current || routing->version() <= have) return;
  pending_ = std::move(routing);
  // Open links to servers we have none for. The new table takes effect only once each of them has
  // been tried, so a server joining the table is not reported UNAVAILABLE while it is dialled;
  // until then requests keep using the current table.
  for (const ServerInfo& s : pending_->current->table().servers) {
    const std::string key = group_key(s);
    auto has_key = [&](const LinkGroup& g) { return g.key == key && !g.shards.empty(); };
    if (std::any_of(groups_.begin(), groups_.end(), has_key) ||
        std::any_of(warming_.begin(), warming_.end(), has_key)) {
      continue;
    }
    LinkGroup g{key, {}};
    for (uint32_t shard = 0; shard < s.shards; ++shard) {
      // A server that comes back within the grace period gets its retired links back.
      auto old = std::find_if(retired_.begin(), retired_.end(), [&](const auto& l) {
        return l->state() != HashLink::State::kClosed && group_key(l->server()) == key &&
               l->shard() == shard;
      });
      if (old != retired_.end()) {
        g.shards.push_back(std::move(*old));
        retired_.erase(old);
        continue;
      }
      g.shards.push_back(std::make_unique<HashLink>(
          ctx_, *this, settings_.link, s, shard,
          (uint64_t{index_} << 32) ^ shard ^ std::hash<std::string>{}(key)));
      g.shards.back()->start();
    }
    warming_.push_back(std::move(g));
  }
  try_commit();
}

void Worker::try_commit() {
  if (!pending_) return;
  for (const auto& g : warming_) {
    for (const auto& l : g.shards) {
      if (!l->first_attempt_done()) return;
    }
  }
  // Arrange the links like the new table's servers; links of servers that left are retired (they
  // finish what they carry, and serve fallback reads until the grace period ends).
  std::vector<LinkGroup> next;
  for (const ServerInfo& s : pending_->current->table().servers) {
    const std::string key = group_key(s);
    LinkGroup g{key, {}};
    for (auto* pool : {&groups_, &warming_}) {
      for (auto& candidate : *pool) {
        if (g.shards.empty() && candidate.key == key && !candidate.shards.empty()) {
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
  router_ = routing_->current.get();
  spdlog::debug("worker {}: table version {}", index_, routing_->version());
  if (on_commit_) on_commit_(routing_->version());

  // Requests that met MOVED and waited for this table go out again, once.
  std::vector<InFlight> parked;
  parked.swap(parked_);
  const int64_t now = now_ns();
  for (auto& r : parked) forward(std::move(r), now);
  flush_links();
  flush_replies();
}

void Worker::schedule_tick() {
  tick_timer_.expires_after(settings_.tick);
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    const int64_t now = now_ns();
    for (auto& g : groups_) {
      for (auto& l : g.shards) l->tick(now);
    }
    const bool in_grace = routing_ && now < routing_->grace_until_ns();
    for (auto& l : retired_) {
      l->tick(now);
      if (l->in_flight() == 0 && (!in_grace || stopping_)) l->close();
    }
    std::erase_if(parked_, [&](InFlight& r) {
      if (r.parked_until_ns > now) return false;
      fail(r, Status::kTimeout);
      return true;
    });
    std::erase_if(retired_, [](const auto& l) { return l->finished(); });
    try_commit();
    flush_replies();
    check_links_tried();
    if (stopping_ && in_flight() == 0 && parked_.empty()) {
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
      unix_now_ = static_cast<uint32_t>(std::time(nullptr));
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
  const Endpoint source = from.endpoint();
  Plan plan;
  if (!limiter_.allow(source, now)) {
    plan = plan_rate_limited({data, size}, reply_buf);
  } else {
    const AuthPolicy auth{.mac = token_mac_.get(), .now = unix_now_};
    plan = plan_request({data, size}, source, routing_ ? routing_->version() : 0, reply_buf,
                        token_mac_ ? &auth : nullptr);
  }
  switch (plan.kind) {
    case Plan::kDrop:
      ++counters_.dropped[static_cast<size_t>(plan.drop)];
      return;
    case Plan::kReply:
      reply(from, reply_buf, plan.reply_size, plan.status);
      return;
    case Plan::kForward:
      forward(
          InFlight{.ask = plan.ask, .client = from, .type = plan.frame_type, .received_ns = now},
          now);
      return;
  }
}

void Worker::fail(InFlight& request, Status status) {
  if (request.stage == InFlight::Stage::kRepair) return;  // nobody waits for a repair
  record_latency(request);
  uint8_t buf[client::kHeaderSize];
  reply(request.client, buf, reply_with_status(request.ask, status, buf), status);
}

void Worker::forward(InFlight request, int64_t now) {
  if (!router_) {
    fail(request, Status::kUnavailable);
    return;
  }
  if (request.type == FrameType::kDelete && request.stage == InFlight::Stage::kFirst &&
      delete_old_copy(request, now)) {
    return;
  }
  const Route route = router_->route(request.ask.user_id);
  HashLink* link = groups_[route.server].shards[route.shard].get();
  if (!link->up() || link->full()) {
    // Down, or as many requests in flight as we allow: fail fast rather than queue without bound.
    fail(request, Status::kUnavailable);
    return;
  }
  ++counters_.forwarded;
  if (link->submit(std::move(request), router_->version(), now)) dirty_.push_back(link);
}

HashLink* Worker::link_to(const ServerInfo& server, uint32_t shard) {
  const std::string key = group_key(server);
  for (auto& g : groups_) {
    if (g.key == key && shard < g.shards.size()) {
      return g.shards[shard]->up() ? g.shards[shard].get() : nullptr;
    }
  }
  for (auto& l : retired_) {
    if (l->shard() == shard && l->up() && group_key(l->server()) == key) return l.get();
  }
  return nullptr;
}

HashLink* Worker::earlier_owner(uint64_t id, uint8_t& from, uint64_t& version, int64_t now) {
  if (!routing_) return nullptr;
  const ServerInfo& owner = router_->owner_info(id);
  for (; from < routing_->earlier.size(); ++from) {
    const auto& e = routing_->earlier[from];
    if (now >= e.grace_until_ns) continue;
    const Route r = e.router->route(id);
    const ServerInfo& then = e.router->table().servers[r.server];
    if (then.name == owner.name && then.address == owner.address) continue;
    HashLink* link = link_to(then, r.shard);
    if (!link || link->full()) continue;  // unreachable: nothing to read or delete there now
    version = e.router->version();
    ++from;
    return link;
  }
  return nullptr;
}

bool Worker::delete_old_copy(InFlight& request, int64_t now) {
  // LOGOUT during a grace period: delete the copies at earlier owners first, so that no fallback
  // read can find the user once the client is told it logged out.
  uint64_t version = 0;
  HashLink* link = earlier_owner(request.ask.user_id, request.earlier, version, now);
  if (!link) return false;
  request.stage = InFlight::Stage::kOldDelete;
  request.flags = kFlagAnyOwner;
  if (link->submit(std::move(request), version, now)) dirty_.push_back(link);
  return true;
}

bool Worker::try_fallback_read(InFlight& request, int64_t now) {
  // DESIGN §4 step 3: during the grace period a lookup that misses at the new owner is retried at
  // the owner under the previous table(s); a user who logged in before the move is never missing.
  if (request.type != FrameType::kGet) return false;
  uint64_t version = 0;
  HashLink* link = earlier_owner(request.ask.user_id, request.earlier, version, now);
  if (!link) return false;
  ++counters_.fallback_reads;
  request.stage = InFlight::Stage::kFallback;
  request.flags = kFlagAnyOwner;
  if (link->submit(std::move(request), version, now)) dirty_.push_back(link);
  return true;
}

void Worker::read_repair(const InFlight& request, const Response& found, int64_t now) {
  // Copy the record to its new owner, keeping its age, unless the user wrote there meanwhile.
  InFlight repair;
  repair.ask = request.ask;
  repair.ask.endpoint = found.endpoint;
  repair.type = FrameType::kUpsert;
  repair.stage = InFlight::Stage::kRepair;
  repair.flags = kFlagIfAbsent;
  repair.age_seconds = found.age_seconds;
  const Route route = router_->route(request.ask.user_id);
  HashLink* link = groups_[route.server].shards[route.shard].get();
  if (!link->up() || link->full()) return;  // best effort: the next heartbeat writes it anyway
  ++counters_.read_repairs;
  if (link->submit(std::move(repair), router_->version(), now)) dirty_.push_back(link);
}

void Worker::on_answer(InFlight& request, const Response& response) {
  const int64_t now = now_ns();
  if (request.stage == InFlight::Stage::kRepair) return;
  if (request.stage == InFlight::Stage::kOldDelete) {
    // That old copy is gone (or was never there): the next earlier owner's, then the owner's.
    if (delete_old_copy(request, now)) return;
    request.stage = InFlight::Stage::kNewDelete;
    request.flags = 0;
    forward(std::move(request), now);
    return;
  }
  if (response.status == FrameStatus::kMoved && !request.retried) {
    // The hash server has a newer table: take it and retry once (DESIGN §2). If it is not at hand
    // yet (pushed tables), park the request until it arrives, within the request's deadline.
    if (tables_ && response.table_version > (routing_ ? routing_->version() : 0)) {
      install(tables_->refresh());
    }
    ++counters_.moved_retries;
    // Start over under the newer table: a LOGOUT deletes the old copies that table knows of too.
    request.retried = true;
    request.stage = InFlight::Stage::kFirst;
    request.earlier = 0;
    request.flags = 0;
    if (routing_ && routing_->version() >= response.table_version) {
      forward(std::move(request), now);
    } else if (parked_.size() < settings_.link.max_in_flight) {
      request.parked_until_ns =
          now +
          std::chrono::duration_cast<std::chrono::nanoseconds>(settings_.link.timeout).count();
      parked_.push_back(std::move(request));
    } else {
      fail(request, Status::kUnavailable);
    }
    return;
  }
  if (response.status == FrameStatus::kNotFound && try_fallback_read(request, now)) return;
  if (request.stage == InFlight::Stage::kFallback && response.status == FrameStatus::kOk) {
    ++counters_.fallback_hits;
    read_repair(request, response, now);
  }
  record_latency(request);
  uint8_t buf[client::kMinDatagram];
  Status status;
  const size_t n = reply_from_response(request.ask, response, buf, status);
  reply(request.client, buf, n, status);
}

void Worker::on_failure(InFlight& request, Status status) { fail(request, status); }

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
