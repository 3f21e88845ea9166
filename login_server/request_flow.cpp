#include "login_server/request_flow.h"

#include <algorithm>
#include <cstring>

namespace imhash {

using client::Status;
using frame::FrameStatus;
using frame::FrameType;


RequestFlow::RequestFlow(const FlowSettings& settings, const LinkView& links,
                         LoginCounters& counters)
    : settings_(settings),
      links_(links),
      counters_(counters),
      token_mac_(settings.auth_key.empty() ? nullptr
                                           : std::make_unique<TokenMac>(settings.auth_key)),
      limiter_(settings.rate_limit) {}

// ---- slots --------------------------------------------------------------------------------------

uint32_t RequestFlow::allocate() {
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Request& r = slots_[index];
  const uint32_t generation = r.generation;
  r = Request{};
  r.generation = generation;
  r.live = true;
  ++used_;
  return index;
}

void RequestFlow::release(uint32_t index) {
  Request& r = slots_[index];
  r.live = false;
  ++r.generation;
  free_.push_back(index);
  --used_;
}

uint64_t RequestFlow::token_of(uint32_t index) const {
  return uint64_t{slots_[index].generation} << 32 | index;
}

RequestFlow::Request* RequestFlow::find(uint64_t token) {
  const auto index = static_cast<uint32_t>(token);
  if (index >= slots_.size()) return nullptr;
  Request& r = slots_[index];
  return r.live && r.generation == static_cast<uint32_t>(token >> 32) ? &r : nullptr;
}

// ---- events -------------------------------------------------------------------------------------

void RequestFlow::set_routing(std::shared_ptr<const RoutingState> routing, int64_t now_ns,
                              FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  routing_ = std::move(routing);
  router_ = routing_ ? routing_->current.get() : nullptr;
  // Requests that met MOVED and waited for a newer table go out again, once.
  std::vector<Parked> parked;
  parked.swap(parked_);
  for (const Parked& p : parked) forward(p.index, now_ns, out);
}

void RequestFlow::on_datagram(std::span<const uint8_t> datagram, const ClientAddr& from,
                              int64_t now_ns, uint32_t unix_now, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  ++counters_.received;
  uint8_t reply_buf[client::kMinDatagram];
  Plan plan;
  const Endpoint source = from.endpoint();
  if (!limiter_.allow(source, now_ns)) {
    plan = plan_rate_limited(datagram, reply_buf);
  } else {
    const AuthPolicy auth{.mac = token_mac_.get(), .now = unix_now};
    plan = plan_request(datagram, source, version(), reply_buf, token_mac_ ? &auth : nullptr);
  }
  switch (plan.kind) {
    case Plan::kDrop:
      ++counters_.dropped[static_cast<size_t>(plan.drop)];
      return;
    case Plan::kReply: {
      FlowAction& a = reply_action(from, plan.status, out);
      std::memcpy(a.reply, reply_buf, plan.reply_size);
      a.reply_size = static_cast<uint8_t>(plan.reply_size);
      return;
    }
    case Plan::kForward:
      break;
  }
  const uint32_t index = allocate();
  Request& r = slots_[index];
  r.ask = plan.ask;
  r.client = from;
  r.type = plan.frame_type;
  r.received_ns = now_ns;
  forward(index, now_ns, out);
}

void RequestFlow::on_answer(uint64_t token, const frame::Response& response, int64_t now_ns,
                            FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  Request* r = find(token);
  if (!r) return;
  const auto index = static_cast<uint32_t>(token);
  switch (r->stage) {
    case Request::Stage::kRepair:
      release(index);
      return;
    case Request::Stage::kOldDelete:
      // That old copy is gone (or was never there): the next earlier owner's, then the owner's.
      if (delete_old_copy(index, now_ns, out)) return;
      r->stage = Request::Stage::kNewDelete;
      r->flags = 0;
      forward(index, now_ns, out);
      return;
    default:
      break;
  }
  if (response.status == FrameStatus::kMoved) {
    if (!r->retried) {
      on_moved(index, response.table_version, now_ns, out);
      return;
    }
    // MOVED again under the newer table: the client hears UNAVAILABLE, and the table that
    // answer names is fetched for the requests after it.
    need_table(response.table_version, out);
  }
  if (response.status == FrameStatus::kNotFound && try_fallback_read(index, now_ns, out)) return;
  if (r->stage == Request::Stage::kFallback && response.status == FrameStatus::kOk) {
    ++counters_.fallback_hits;
    read_repair(*r, response, out);
  }
  reply_answer(index, response, now_ns, out);
}

void RequestFlow::on_failure(uint64_t token, Status status, int64_t now_ns, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!find(token)) return;
  fail(static_cast<uint32_t>(token), status, now_ns, out);
}

void RequestFlow::tick(int64_t now_ns, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  std::erase_if(parked_, [&](const Parked& p) {
    if (p.until_ns > now_ns) return false;
    fail(p.index, Status::kTimeout, now_ns, out);
    return true;
  });
}

// ---- the stages ---------------------------------------------------------------------------------

LinkTarget RequestFlow::current_target(uint64_t id) const {
  const Route route = router_->route(id);
  return LinkTarget{&router_->table().servers[route.server], route.server, route.shard};
}

void RequestFlow::send(uint32_t index, const LinkTarget& target, uint64_t table_version,
                       FlowActions& out) {
  const Request& r = slots_[index];
  FlowAction& a = out.emplace_back();
  a.kind = FlowAction::kSend;
  a.target = target;
  a.frame = frame::Request{
      .type = r.type, .flags = r.flags, .table_version = table_version, .id = r.ask.user_id};
  if (r.type == FrameType::kUpsert) {
    a.frame.endpoint = r.ask.endpoint;
    a.frame.age_seconds = r.age_seconds;
  }
  a.token = token_of(index);
}

void RequestFlow::forward(uint32_t index, int64_t now_ns, FlowActions& out) {
  Request& r = slots_[index];
  if (!router_) {
    fail(index, Status::kUnavailable, now_ns, out);
    return;
  }
  if (r.type == FrameType::kDelete && r.stage == Request::Stage::kFirst &&
      delete_old_copy(index, now_ns, out)) {
    return;
  }
  const LinkTarget target = current_target(r.ask.user_id);
  if (!links_.can_send(target)) {
    // Down, or as many requests in flight as we allow: fail fast rather than queue without bound.
    fail(index, Status::kUnavailable, now_ns, out);
    return;
  }
  ++counters_.forwarded;
  send(index, target, router_->version(), out);
}

bool RequestFlow::earlier_owner(uint64_t id, uint8_t& from, int64_t now_ns, LinkTarget& target,
                                uint64_t& version) const {
  if (!routing_) return false;
  const ServerInfo& owner = router_->owner_info(id);
  for (; from < routing_->earlier.size(); ++from) {
    const auto& e = routing_->earlier[from];
    if (now_ns >= e.grace_until_ns) continue;
    const Route route = e.router->route(id);
    const ServerInfo& then = e.router->table().servers[route.server];
    if (then.name == owner.name && then.address == owner.address) continue;
    // The worker keeps one set of links per server (name, address, shards): a server the current
    // table still has under the same identity is reached through its current links.
    const int i = router_->table().server_index(then.name);
    const ServerInfo* now = i < 0 ? nullptr : &router_->table().servers[static_cast<size_t>(i)];
    const bool current = now && now->address == then.address && now->shards == then.shards;
    target = LinkTarget{&then, current ? static_cast<uint32_t>(i) : LinkTarget::kNotCurrent,
                        route.shard};
    if (!links_.can_send(target)) continue;  // unreachable: nothing to read or delete there now
    version = e.router->version();
    ++from;
    return true;
  }
  return false;
}

bool RequestFlow::delete_old_copy(uint32_t index, int64_t now_ns, FlowActions& out) {
  Request& r = slots_[index];
  LinkTarget target;
  uint64_t version = 0;
  if (!earlier_owner(r.ask.user_id, r.earlier, now_ns, target, version)) return false;
  r.stage = Request::Stage::kOldDelete;
  r.flags = frame::kFlagAnyOwner;
  send(index, target, version, out);
  return true;
}

bool RequestFlow::try_fallback_read(uint32_t index, int64_t now_ns, FlowActions& out) {
  // During the grace period a lookup that misses at the new owner is retried at the owner under
  // the previous table(s): a user who logged in before the move is never missing.
  Request& r = slots_[index];
  if (r.type != FrameType::kGet) return false;
  LinkTarget target;
  uint64_t version = 0;
  if (!earlier_owner(r.ask.user_id, r.earlier, now_ns, target, version)) return false;
  ++counters_.fallback_reads;
  r.stage = Request::Stage::kFallback;
  r.flags = frame::kFlagAnyOwner;
  send(index, target, version, out);
  return true;
}

void RequestFlow::read_repair(const Request& found_for, const frame::Response& found,
                              FlowActions& out) {
  // Copy the record to its owner, keeping its age, unless the user wrote there meanwhile.
  const LinkTarget target = current_target(found_for.ask.user_id);
  if (!links_.can_send(target)) return;  // best effort: the next heartbeat writes it anyway
  const ClientAsk ask = found_for.ask;
  const uint32_t index = allocate();  // may move slots_: `found_for` is not used after this
  Request& r = slots_[index];
  r.ask = ask;
  r.ask.endpoint = found.endpoint;
  r.type = FrameType::kUpsert;
  r.stage = Request::Stage::kRepair;
  r.flags = frame::kFlagIfAbsent;
  r.age_seconds = found.age_seconds;
  ++counters_.read_repairs;
  send(index, target, router_->version(), out);
}

void RequestFlow::on_moved(uint32_t index, uint64_t their_version, int64_t now_ns,
                           FlowActions& out) {
  // The hash server has a newer table: fetch it and retry once. Until it arrives the request is
  // parked, within its deadline.
  need_table(their_version, out);
  ++counters_.moved_retries;
  Request& r = slots_[index];
  // Start over under the newer table: a LOGOUT deletes the old copies that table knows of too.
  r.retried = true;
  r.stage = Request::Stage::kFirst;
  r.earlier = 0;
  r.flags = 0;
  if (version() >= their_version) {
    forward(index, now_ns, out);
  } else if (parked_.size() < settings_.max_parked) {
    parked_.push_back({index, now_ns + settings_.park_ns});
  } else {
    fail(index, Status::kUnavailable, now_ns, out);
  }
}

void RequestFlow::need_table(uint64_t their_version, FlowActions& out) const {
  if (their_version <= version()) return;
  FlowAction& a = out.emplace_back();
  a.kind = FlowAction::kNeedTable;
  a.version = their_version;
}

FlowAction& RequestFlow::reply_action(const ClientAddr& to, Status status, FlowActions& out) {
  FlowAction& a = out.emplace_back();
  a.kind = FlowAction::kReply;
  a.to = to;
  a.status = status;
  a.reply_size = 0;
  return a;
}

void RequestFlow::reply_answer(uint32_t index, const frame::Response& response, int64_t now_ns,
                               FlowActions& out) {
  const Request& r = slots_[index];
  counters_.record_latency(now_ns - r.received_ns);
  Status status;
  uint8_t buf[client::kMinDatagram];
  const size_t n = reply_from_response(r.ask, response, buf, status);
  FlowAction& a = reply_action(r.client, status, out);
  std::memcpy(a.reply, buf, n);
  a.reply_size = static_cast<uint8_t>(n);
  release(index);
}

void RequestFlow::fail(uint32_t index, Status status, int64_t now_ns, FlowActions& out) {
  const Request& r = slots_[index];
  if (r.stage == Request::Stage::kRepair) {  // nobody waits for a repair
    release(index);
    return;
  }
  counters_.record_latency(now_ns - r.received_ns);
  FlowAction& a = reply_action(r.client, status, out);
  a.reply_size = static_cast<uint8_t>(reply_with_status(r.ask, status, a.reply));
  release(index);
}

}  // namespace imhash
