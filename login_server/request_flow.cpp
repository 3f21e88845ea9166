#include "login_server/request_flow.h"

#include <algorithm>
#include <cstring>
#include <limits>

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
      limiter_(settings.rate_limit),
      latest_writes_(kLatestWrites) {
  if (settings.trace_failed) trace_ = std::make_unique<FlowTrace>();
}

namespace {
const char* stage_name(uint8_t stage) {
  static constexpr const char* kNames[] = {"first",      "fallback",      "repair",    "old-delete",
                                           "new-delete", "replica-write", "abandoned", "unsettled"};
  return stage < std::size(kNames) ? kNames[stage] : "?";
}
}  // namespace

void RequestFlow::report_failure(uint32_t index, Status status) {
  if (!trace_ || (status != Status::kTimeout && status != Status::kUnavailable)) return;
  const Request& r = slots_[index];
  std::string line = std::string(client::to_string(status)) + " for " + frame::to_string(r.type) +
                     " of user " + std::to_string(r.ask.user_id) + ": " + trace_->told(index);
  if (r.hedged) {
    const Request& first = slots_[r.took_over];
    if (first.live && first.generation == r.took_over_gen) {
      line += " || its first try (" + std::string(stage_name(static_cast<uint8_t>(first.stage))) +
              "): " + trace_->told(r.took_over);
    }
  }
  trace_->report(std::move(line));
}

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
  if (trace_) trace_->start(index);
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
  trace_now(now_ns);
  const std::shared_ptr<const RoutingState> before = std::move(routing_);
  routing_ = std::move(routing);
  router_ = routing_ ? routing_->current.get() : nullptr;
  // The same table with longer grace periods (TableSource::install): nothing else changed.
  if (before && router_ && before->current.get() == router_) return;
  if (before && before->current && router_ && !hint_queues_.empty() &&
      before->current->version() != router_->version() && router_->replicas() > 1) {
    hold_for_new_members(*before->current);
  }
  // Requests that met MOVED and waited for this table (or an older one) go out again, once. Those
  // waiting for a newer one stay parked: a push can bring the versions between first (a server
  // added, then ids assigned to it), and under those the old owner would answer MOVED again.
  std::vector<Parked> parked;
  parked.swap(parked_);
  const uint64_t have = version();
  for (const Parked& p : parked) {
    if (p.version <= have) {
      slots_[p.index].parked = false;
      forward(p.index, now_ns, out);
    } else {
      parked_.push_back(p);
    }
  }
}

void RequestFlow::on_datagram(std::span<const uint8_t> datagram, const ClientAddr& from,
                              int64_t now_ns, uint32_t unix_now, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  trace_now(now_ns);
  ++counters_.received;
  uint8_t reply_buf[client::kMinDatagram];
  Plan plan;
  const Endpoint source = from.endpoint();
  const RateLimiter::Verdict verdict = limiter_.admit(source, now_ns);
  if (verdict == RateLimiter::Verdict::kDrop) {
    ++counters_.dropped[static_cast<size_t>(DropReason::kRateLimited)];
    return;
  }
  if (verdict == RateLimiter::Verdict::kRefuse) {
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
  r.made_ns = now_ns;
  if (r.type != FrameType::kGet) {
    r.write_seq = ++writes_;
    latest_writes_[r.ask.user_id & (kLatestWrites - 1)] = {r.ask.user_id, r.write_seq};
  }
  forward(index, now_ns, out);
}

void RequestFlow::on_answer(uint64_t token, const frame::Response& response, int64_t now_ns,
                            FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  Request* r = find(token);
  if (!r) return;
  const auto index = static_cast<uint32_t>(token);
  trace_now(now_ns);
  trace(index, "answer", frame::to_string(response.status));
  if (!slow_.empty()) clear_slow(*r);
  switch (r->stage) {
    case Request::Stage::kAbandoned:
      // A hedged read's first try answered OK before the member it went on to. Not its miss: a
      // slow first member may be one new to the id, not yet streamed it, whose miss the hedge was
      // asked to overrule (7abf866 took it as the answer: a CI run under ASan, failover with a
      // 1 s grace period, read 6 users as NOT_FOUND).
      if (response.status == FrameStatus::kOk && first_try_answers(index)) break;
      release(index);
      return;
    case Request::Stage::kRepair:
      release(index);
      return;
    case Request::Stage::kUnsettled:  // answered after all (the flow's own deadline came first)
      settle_answered(index, response, out);
      return;
    case Request::Stage::kReplicaWrite:
      // A hedged write's first try, applied before the member it went on to answered: the write
      // is at one member, as a write answered in time is, and the client hears so (the same run:
      // 9 writes that their member applied 60 ms late were answered TIMEOUT).
      if ((response.status == FrameStatus::kOk || response.status == FrameStatus::kNotFound) &&
          first_try_answers(index)) {
        break;
      }
      if (response.status != FrameStatus::kOk && response.status != FrameStatus::kNotFound) {
        ++counters_.replica_write_failures;
      }
      if (response.status == FrameStatus::kMoved) {
        need_table(response.table_version, out);
        if (delete_left_copy(index, response.table_version, out)) return;
        // The answering copy retries on MOVED and sends the copies again; but it may have been
        // taken under the older table, and then this member would never get the write.
        hold_until_table(index, response.table_version);
      }
      release(index);
      return;
    case Request::Stage::kOldDelete:
      // That old copy is gone (or was never there): the next earlier owner's, then the owner's.
      next_old_delete(index, now_ns, out);
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
  // A member that answers but cannot serve (WRONG_SHARD ...) is as good as down: the next one. Not
  // after NOT_FOUND, which is an answer (the user logged out), nor MOVED, which is a newer table.
  if (response.status != FrameStatus::kOk && response.status != FrameStatus::kNotFound &&
      response.status != FrameStatus::kMoved && read_next_member(index, now_ns, out)) {
    return;
  }
  // A fallback read's miss after a definite miss at a current member is the answer of that
  // earlier set: its members hold what they held at the move, the same writes (hedge_fallback),
  // so only older tables are left to ask. (Asking the set's other members too waited on the
  // slowest: nemesis seeds 22, 25, 26 and 28, lookups of users logged out long before timed out
  // at an earlier member cut from the login servers after another member of its set had answered
  // NOT_FOUND.) A member being refilled answers such a miss NOT_READY: the next one is asked.
  // Not at once the miss of a member the id's set has dropped while one of that set is a member
  // still: the dropped one refuses with MOVED the copies of writes it gets after its switch, which
  // the member then and now took (a CI run under ASan: a server taken for DOWN during a storm of
  // logins was removed, and users just logged in missed at it and at their new member, their
  // member of both tables not asked). That member is asked within the hedge delay; past it the
  // miss stands (hedge_fallback): waited for to the deadline, a frozen one cost users logged out
  // long before a TIMEOUT (a nemesis run, seed 55: 3).
  if (r->stage == Request::Stage::kFallback && !r->in_doubt &&
      response.status == FrameStatus::kNotFound) {
    if (miss_ends_earlier_set(*r)) {
      r->earlier = static_cast<uint8_t>(r->earlier + 1);
      r->earlier_member = 0;
      r->earlier_slow = 0;
    } else {
      r->miss_stands = true;
    }
  }
  if (r->stage == Request::Stage::kFallback && response.status == FrameStatus::kNotReady &&
      try_fallback_read(index, !r->in_doubt, now_ns, out)) {
    return;
  }
  // Not when the member says the user logged out during the move (kFlagDeleted): an earlier
  // owner may still have a copy from before that (its old-copy delete went on without waiting).
  if (response.status == FrameStatus::kNotFound && (response.flags & frame::kFlagDeleted) == 0 &&
      try_fallback_read(index, !r->in_doubt, now_ns, out)) {
    return;
  }
  // A hedged read's miss at a member that joined the id's set during a grace period, with no
  // earlier member to ask (down, or its link full) or after the earlier members missed too: that
  // member may not have been streamed the id yet, and the first try, still on its way, went to one
  // that had it (a CI run under ASan: a failover gave users a new replica, their slow first member
  // was hedged, and the new one's NOT_FOUND was the client's answer). An earlier member's miss
  // settles nothing here: one the table dropped refuses with MOVED the copies of writes it gets
  // after its switch (a CI run under ASan: a server taken for DOWN was removed during a storm of
  // logins, and 72 users just logged in were read as NOT_FOUND at it and at their new replica).
  const Request::Stage stage = slots_[index].stage;
  if (response.status == FrameStatus::kNotFound && (response.flags & frame::kFlagDeleted) == 0 &&
      slots_[index].hedged &&
      (stage == Request::Stage::kFirst || stage == Request::Stage::kFallback) && router_ &&
      joined_in_grace(slots_[index].ask.user_id, read_member(slots_[index]), now_ns) &&
      back_to_first_try(index)) {
    return;
  }
  // NOT_READY from the last member there was to ask (one being refilled, or one that has no table
  // yet and may have lost what it held): during a grace period the earlier owner still holds what
  // it held before the move, so a user who moved is found there. A miss there is no answer for
  // the members, though: UNAVAILABLE, as without the fallback.
  // Not while a hedged read's first try is still on its way, though: that member is a current
  // one and has every write since the move, which an earlier member does not (a nemesis run: the
  // first try's link lossy, the next member back empty and being refilled, and the earlier table's
  // third member, dropped from the set by a replica change, answered with the user's endpoint from
  // before the change). The first try's answer is awaited instead (back_to_first_try below).
  if (response.status == FrameStatus::kNotReady && r->stage == Request::Stage::kFirst &&
      !first_try_server(*r) && try_fallback_read(index, false, now_ns, out)) {
    slots_[index].in_doubt = true;
    return;
  }
  if (response.status != FrameStatus::kOk && response.status != FrameStatus::kNotFound &&
      back_to_first_try(index)) {
    return;
  }
  if (response.status == FrameStatus::kNotFound && r->in_doubt) {
    frame::Response doubt = response;
    doubt.status = FrameStatus::kNotReady;
    reply_answer(index, doubt, now_ns, out);
    return;
  }
  if (r->stage == Request::Stage::kFallback && response.status == FrameStatus::kOk) {
    ++counters_.fallback_hits;
    read_repair(*r, response, out);
  }
  reply_answer(index, response, now_ns, out);
}

void RequestFlow::on_failure(uint64_t token, Status status, int64_t now_ns, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  Request* r = find(token);
  if (!r) return;
  const auto index = static_cast<uint32_t>(token);
  trace_now(now_ns);
  trace(index, "link failure", client::to_string(status));
  if (r->stage == Request::Stage::kUnsettled) {
    // Its client heard TIMEOUT from the flow's own deadline: now the link's, or the link's end.
    if (status == Status::kTimeout) return;  // on_settled or on_lost comes later
    on_lost(token, now_ns);
    return;
  }
  if (r->stage == Request::Stage::kOldDelete && status == Status::kUnavailable) {
    // The old copy's link went down with its delete on it: the LOGOUT goes on, as when that
    // server is only slow (skip_old_delete). A nemesis run: the link to a drained server cut
    // from the login servers was marked down just before the delete's hedge; UNAVAILABLE.
    next_old_delete(index, now_ns, out);
    return;
  }
  if (status == Status::kUnavailable) hold_again(index);
  if (read_next_member(index, now_ns, out)) return;
  if (status == Status::kUnavailable && write_next_member(index, now_ns, out)) return;
  if (status == Status::kTimeout && keep_unsettled(index, now_ns, out)) return;
  if (back_to_first_try(index)) return;
  fail(index, status, now_ns, out);
}

void RequestFlow::tick(int64_t now_ns, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  trace_now(now_ns);
  while (hedges_.due(now_ns)) hedge(hedges_.pop(), now_ns, out);
  while (deadlines_.due(now_ns)) {
    // The hedged request, whatever it has tried since (the next member, a fallback read): its
    // client hears within park_ns of the first try. A parked one has its own deadline.
    const Timer t = deadlines_.pop();
    const Request& r = slots_[t.index];
    const bool waited_for =
        r.stage == Request::Stage::kFirst || r.stage == Request::Stage::kNewDelete ||
        r.stage == Request::Stage::kFallback || r.stage == Request::Stage::kOldDelete;
    if (!r.live || r.generation != t.generation || r.parked || !waited_for) continue;
    if (!keep_unsettled(t.index, now_ns, out)) fail(t.index, Status::kTimeout, now_ns, out);
  }
  release_link_waits(now_ns, out);
  std::erase_if(parked_, [&](const Parked& p) {
    if (p.until_ns > now_ns) return false;
    fail(p.index, Status::kTimeout, now_ns, out);
    return true;
  });
  // Held writes whose member is reachable again go out, in order. A member the table no longer
  // has will not be back under this identity: its writes are dropped.
  for (size_t i = 0; i < hint_queues_.size();) {
    HintQueue& q = hint_queues_[i];
    const int s = router_ ? router_->table().server_index(q.server) : -1;
    const ServerInfo* info = s < 0 ? nullptr : &router_->table().servers[static_cast<size_t>(s)];
    if (!info || info->address != q.address || q.shard >= info->shards) {
      counters_.hints_dropped += q.hints.size();
      hint_queues_.erase(hint_queues_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const size_t before = hint_queues_.size();
    replay_hints(LinkTarget{info, static_cast<uint32_t>(s), q.shard}, out);
    if (hint_queues_.size() == before) ++i;  // else this queue emptied and was erased
  }
}

bool RequestFlow::same_server(const ServerInfo& a, const ServerInfo& b) {
  return a.name == b.name && a.address == b.address;
}

bool RequestFlow::member_of(const Router& table_of, const ReplicaSet& set,
                            const ServerInfo& server) {
  for (uint32_t k = 0; k < set.size; ++k) {
    if (same_server(table_of.table().servers[set.routes[k].server], server)) return true;
  }
  return false;
}

// ---- the stages ---------------------------------------------------------------------------------

LinkTarget RequestFlow::member_target(const Route& route) const {
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
  if (r.made_ns != 0 && (r.flags & ~frame::kFlagAnyOwner) == 0 && r.type != FrameType::kGet) {
    // A client's write says when it was made (Unix milliseconds, the low 32 bits): the member
    // keeps a write of the user made after it, which another connection may have brought first
    // (another thread or login server, a write held for the member, a connection slowed by loss
    // or a member frozen with frames in its socket). A time, not an age: an age is stale by the
    // time a queued frame is read. A LOGOUT's old-copy delete too: untimed, it was taken as made
    // when it arrived, just after the LOGOUT, and the same LOGOUT's copy held for that server and
    // replayed once a table brought the id back to it was refused as older (nemesis seed 22: a
    // stale copy streamed to it meanwhile stayed, and the LOGOUT was undone).
    a.frame.flags |= frame::kFlagTimed;
    a.frame.age_seconds = static_cast<uint32_t>((r.made_ns + wall_offset_ns_) / 1'000'000);
  }
  a.token = token_of(index);
  Request& sent = slots_[index];
  if (trace_) {
    trace_->note(index, "sent", stage_name(static_cast<uint8_t>(sent.stage)), target.server->name,
                 target.shard, table_version);
  }
  ++sent.sends;
  sent.link_server = target.current;
  sent.link_shard = target.shard;
  sent.link_version = router_ ? router_->version() : 0;
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
  // The first member of the replica set (the owner, unless its link cannot take the frame) answers
  // the client.
  const ReplicaSet set = router_->replica_set(r.ask.user_id);
  // A hedged request sent again (MOVED by the member it went on to, whose table was newer) does
  // not go back first to a member it left as slow while another can take it: unhedged there, it
  // waited out its deadline (a long run, seed 107: 3 TIMEOUTs; seed 41: 1).
  const bool pass_slow = r.hedged && !slow_.empty();
  uint32_t first = set.size;
  LinkTarget target;
  for (int pass = pass_slow ? 0 : 1; pass < 2 && first == set.size; ++pass) {
    for (uint32_t k = 0; k < set.size; ++k) {
      const LinkTarget t = member_target(set.routes[k]);
      if (pass == 0 && is_slow(t)) continue;
      if (ready(t, out)) {
        first = k;
        target = t;
        break;
      }
    }
  }
  if (first == set.size) {
    // Down, or as many requests in flight as we allow: fail fast rather than queue without bound.
    // Not while a member's first connection is being made: a table takes effect before its new
    // servers' links are tried once a hash server named it in a MOVED (routing_state.h), and a
    // member the table added may be the only one of the set not down (nemesis seeds 21 and 24: a
    // server added back after a drain became the replica of a range whose owner had just been
    // killed; 4 and 5 requests were answered UNAVAILABLE in the 10 ms its link took to connect).
    if (wait_for_dialled_member(index, set, now_ns)) return;
    fail(index, Status::kUnavailable, now_ns, out);
    return;
  }
  Request& sent = slots_[index];  // ready() may have added slots (held writes sent): `r` moved
  sent.member = static_cast<uint8_t>(first);
  ++counters_.forwarded;
  if (first > 0 && sent.type == FrameType::kGet) ++counters_.replica_reads;
  send(index, target, router_->version(), out);
  arm_hedge(index, now_ns);
  if (sent.type != FrameType::kGet) write_replicas(index, set, first, out);
}

void RequestFlow::write_replicas(uint32_t index, const ReplicaSet& set, uint32_t answering,
                                 FlowActions& out) {
  // Every other member gets its own copy, which nobody waits for: the client's answer is the
  // `answering` member's. A member out of reach, or with writes already held for it, gets it held
  // (a hint), to be sent in order once its link is back. Copies of old-copy deletes and repairs
  // (flags set) are not held: they are best effort.
  for (uint32_t i = 0; i < set.size; ++i) {
    if (i == answering) continue;
    const LinkTarget target = member_target(set.routes[i]);
    if (!ready(target, out)) {
      if (slots_[index].flags == 0) hold(target, slots_[index]);
      continue;
    }
    const uint32_t copy = copy_of(index);
    Request& c = slots_[copy];
    c.flags = slots_[index].flags;
    c.stage = Request::Stage::kReplicaWrite;
    ++counters_.replica_writes;
    send(copy, target, router_->version(), out);
  }
}

bool RequestFlow::read_next_member(uint32_t index, int64_t now_ns, FlowActions& out) {
  // A read the member could not serve is asked again at once at the next member of the replica set
  // that can be reached. (Should the table have changed meanwhile, the walk goes on from the same
  // position in the new set, so a read is still sent at most R times per table.)
  Request& r = slots_[index];
  if (r.type != FrameType::kGet || r.stage != Request::Stage::kFirst || !router_ ||
      router_->replicas() == 1) {
    return false;
  }
  const ReplicaSet set = router_->replica_set(r.ask.user_id);
  for (uint32_t i = r.member + 1u; i < set.size; ++i) {
    const LinkTarget target = member_target(set.routes[i]);
    // Not one with writes held for it: it has not had them yet (ready() sends them first, and
    // may add slots: `r` is not used after it).
    if (!ready(target, out)) continue;
    slots_[index].member = static_cast<uint8_t>(i);
    ++counters_.replica_reads;
    send(index, target, router_->version(), out);
    arm_hedge(index, now_ns);
    return true;
  }
  return false;
}

bool RequestFlow::write_next_member(uint32_t index, int64_t now_ns, FlowActions& out) {
  // The answering member's link broke with the write on it (or it was never submitted): the write
  // is held for that member (hold_again), and the next member that can take it answers the
  // client instead. It had its copy already (write_replicas): a second one is the same write.
  // Not after a timeout: that write may still be applied, and is the client's to retry.
  const Request& r = slots_[index];
  if (r.type == FrameType::kGet || r.flags != 0 || !router_ || router_->replicas() == 1 ||
      (r.stage != Request::Stage::kFirst && r.stage != Request::Stage::kNewDelete) ||
      r.link_version != router_->version()) {
    return false;
  }
  const ReplicaSet set = router_->replica_set(r.ask.user_id);
  for (uint32_t i = r.member + 1u; i < set.size; ++i) {
    const LinkTarget target = member_target(set.routes[i]);
    if (!ready(target, out)) continue;  // may add slots: `r` is not used after it
    slots_[index].member = static_cast<uint8_t>(i);
    send(index, target, router_->version(), out);
    arm_hedge(index, now_ns);
    return true;
  }
  return false;
}

bool RequestFlow::miss_ends_earlier_set(const Request& r) const {
  const LinkTarget at = sent_to_now(r);
  if (at.server && router_->holds(r.ask.user_id, at.current)) return true;  // a member still
  if (r.earlier >= routing_->earlier.size()) return true;
  const Router& then = *routing_->earlier[r.earlier].router;
  const ReplicaSet then_set = then.replica_set(r.ask.user_id);
  const ReplicaSet now_set = router_->replica_set(r.ask.user_id);
  for (uint32_t k = 0; k < then_set.size; ++k) {
    if (member_of(*router_, now_set, then.table().servers[then_set.routes[k].server])) return false;
  }
  return true;
}

const ServerInfo& RequestFlow::read_member(const Request& r) const {
  const ReplicaSet set = router_->replica_set(r.ask.user_id);
  return router_->table().servers[set.routes[std::min<uint32_t>(r.member, set.size - 1)].server];
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
  r.earlier_member = 0;
  r.earlier_slow = 0;
  r.flags = 0;
  if (version() >= their_version) {
    forward(index, now_ns, out);
  } else if (parked_.size() < settings_.max_parked) {
    parked_.push_back({index, now_ns + settings_.park_ns, their_version});
    r.parked = true;
    trace(index, "parked for a newer table");
  } else {
    fail(index, Status::kUnavailable, now_ns, out);
  }
}

bool RequestFlow::wait_for_dialled_member(uint32_t index, const ReplicaSet& set, int64_t now_ns) {
  bool dialled = false;
  for (uint32_t k = 0; k < set.size && !dialled; ++k) {
    dialled = links_.dialling(member_target(set.routes[k]));
  }
  if (!dialled || parked_.size() >= settings_.max_parked) return false;
  parked_.push_back({index, now_ns + settings_.park_ns, version()});
  slots_[index].parked = true;
  trace(index, "waits for a link being dialled");
  return true;
}

void RequestFlow::release_link_waits(int64_t now_ns, FlowActions& out) {
  if (parked_.empty() || !router_) return;
  auto waits_on = [&](const Parked& p) {
    const ReplicaSet set = router_->replica_set(slots_[p.index].ask.user_id);
    bool dialled = false;
    for (uint32_t k = 0; k < set.size; ++k) {
      const LinkTarget target = member_target(set.routes[k]);
      if (links_.can_send(target)) return false;
      dialled = dialled || links_.dialling(target);
    }
    return dialled;
  };
  std::vector<uint32_t> go;
  std::erase_if(parked_, [&](const Parked& p) {
    if (p.version > version() || waits_on(p)) return false;  // a newer table's wait: MOVED
    go.push_back(p.index);
    return true;
  });
  for (const uint32_t index : go) {
    slots_[index].parked = false;
    forward(index, now_ns, out);
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
  if (r.stage == Request::Stage::kRepair || r.stage == Request::Stage::kAbandoned) {
    release(index);  // nobody waits for these
    return;
  }
  if (r.stage == Request::Stage::kReplicaWrite) {  // nor for a replica's copy
    ++counters_.replica_write_failures;
    release(index);
    return;
  }
  counters_.record_latency(now_ns - r.received_ns);
  report_failure(index, status);
  FlowAction& a = reply_action(r.client, status, out);
  a.reply_size = static_cast<uint8_t>(reply_with_status(r.ask, status, a.reply));
  release(index);
}

}  // namespace imhash
