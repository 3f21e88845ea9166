// RequestFlow during grace periods (request_flow.h; docs/design.md, "The request flow"): the
// members of ids' replica sets under earlier tables, asked by a lookup that misses at a new member
// (a fallback read, and the read repair of what it finds) and by a LOGOUT, which deletes their old
// copies before the current members' (and goes on without one that is slow or out of reach).
// The rest of the flow is in request_flow.cpp.
#include <algorithm>
#include <bit>

#include "login_server/request_flow.h"

namespace imhash {

using frame::FrameStatus;
using frame::FrameType;

void RequestFlow::skip_old_delete(const Timer& t, int64_t now_ns, FlowActions& out) {
  // An old copy's server too slow to answer (cut off, frozen): its delete goes on without anyone
  // waiting for it, and so do the other old copies' deletes, sent now, and the LOGOUT goes on to
  // the current members within the first try's deadline. (Waited for, one slow copy cost the
  // client a TIMEOUT: a nemesis run, a login server cut from a server being drained; waited for
  // one after the other, two slow copies did.) Until those copies are deleted a fallback read
  // cannot find them: the current members' misses say the user was deleted during the move.
  const uint32_t next = take_over(t.index);
  Request& slow = slots_[t.index];
  slots_[next].earlier = slow.earlier;
  slots_[next].earlier_member = slow.earlier_member;
  slow.stage = Request::Stage::kRepair;
  for (;;) {
    LinkTarget target;
    uint64_t version = 0;
    Request& r = slots_[next];
    if (!earlier_owner(r.ask.user_id, r.earlier, r.earlier_member, now_ns, target, version)) break;
    const uint32_t copy = copy_of(next);  // may move slots_
    slots_[copy].stage = Request::Stage::kRepair;
    slots_[copy].flags = frame::kFlagAnyOwner;
    send(copy, target, version, out);
  }
  Request& n = slots_[next];
  n.stage = Request::Stage::kNewDelete;
  n.flags = 0;
  forward(next, now_ns, out);
  const Request& sent = slots_[next];
  if (sent.live) {
    deadlines_.push(
        {next, sent.generation, sent.sends, t.at_ns - settings_.hedge_ns + settings_.park_ns});
  }
}

void RequestFlow::mark_slow(const Request& r) {
  const LinkTarget t = sent_to_now(r);
  if (!t.server || is_slow(t)) return;
  if (slow_.size() >= kMaxSlow) slow_.erase(slow_.begin());
  slow_.push_back({t.server->name, t.server->address});
}

void RequestFlow::clear_slow(const Request& r) {
  const LinkTarget t = sent_to_now(r);
  if (!t.server) return;
  std::erase_if(slow_, [&](const SlowMark& m) {
    return m.server == t.server->name && m.address == t.server->address;
  });
}

bool RequestFlow::is_slow(const LinkTarget& t) const {
  for (const SlowMark& m : slow_) {
    if (m.server == t.server->name && m.address == t.server->address) return true;
  }
  return false;
}

bool RequestFlow::earlier_owner(uint64_t id, uint8_t& from, uint8_t& member, int64_t now_ns,
                                LinkTarget& target, uint64_t& version, const ServerInfo* answered,
                                bool missed, const ServerInfo* waiting,
                                uint8_t* slow_skipped) const {
  if (!routing_) return false;
  const auto& servers = router_->table().servers;
  ReplicaSet now_set;  // computed once a table in its grace period needs it
  // The link to `route`'s server under the earlier table `then`: a server the current table still
  // has under the same identity is reached through its current links (the worker keeps one set
  // of links per server: name, address, shards).
  const auto link_to = [&](const Router& then, const Route& route) {
    const ServerInfo& s = then.table().servers[route.server];
    const int i = router_->table().server_index(s.name);
    const ServerInfo* now = i < 0 ? nullptr : &servers[static_cast<size_t>(i)];
    const bool current = now && now->address == s.address && now->shards == s.shards;
    return LinkTarget{&s, current ? static_cast<uint32_t>(i) : LinkTarget::kNotCurrent,
                      route.shard};
  };
  const auto next_table = [&] {
    ++from;
    member = 0;
    if (slow_skipped) *slow_skipped = 0;
  };
  for (; from < routing_->earlier.size(); next_table()) {
    const auto& e = routing_->earlier[from];
    if (now_ns >= e.grace_until_ns) continue;
    if (now_set.size == 0) now_set = router_->replica_set(id);
    const ReplicaSet then_set = e.router->replica_set(id);
    if (answered) {
      // The same set then as now: nothing was moved, every member has had every write.
      if (same_members(*e.router, then_set, now_set)) continue;
      // A member then as now had every write of the id then, a LOGOUT's delete too: its miss is
      // the answer. Asking the others would find the old copy of a member the set has dropped,
      // which an unreachable member misses the LOGOUT's old-copy delete for (a nemesis run:
      // hash3 frozen while the copies went from 3 to 2; 43 LOGOUTs read as undone from it).
      if (missed && member_of(*e.router, then_set, *answered)) continue;
    }
    for (; member < then_set.size; ++member) {
      const Route route = then_set.routes[member];
      const ServerInfo& then = e.router->table().servers[route.server];
      if (answered) {
        // A read asks every other member of the earlier set, current ones too: after a
        // failover the new owner has not been streamed the id yet, and its old replica has it.
        if (same_server(then, *answered)) continue;
        // The slow member a hedged read left: asked again, it answers no sooner than the first
        // try, and the client waits past its deadline (a nemesis run: a drain gave the ids a new
        // replica while their owner's link was slow; the new replica's misses were read again
        // at that owner, and timed out).
        if (waiting && same_server(then, *waiting)) continue;
      } else {
        // A delete: a server that holds the id now as well gets the current members' delete.
        if (member_of(*router_, now_set, then)) continue;
      }
      target = link_to(*e.router, route);
      // Unreachable, or with a write of the id held for it (it may answer from before it): not
      // now. Writes of other ids held for it say nothing of this one (a CI run under ASan: after a
      // failover, writes held for the dead server were held for the ids' new members too, and
      // lookups of users who had not written since missed at their new member and were answered
      // NOT_FOUND, the member that had them being skipped).
      if (!links_.can_send(target) || held_for(target, id)) continue;
      if (slow_skipped && member < 8 && is_slow(target)) {
        *slow_skipped = static_cast<uint8_t>(*slow_skipped | (1u << member));
        continue;
      }
      version = e.router->version();
      ++member;
      return true;
    }
    // The set's slow members, once the others have been asked.
    while (slow_skipped && *slow_skipped != 0) {
      const auto k = static_cast<uint32_t>(std::countr_zero(*slow_skipped));
      *slow_skipped = static_cast<uint8_t>(*slow_skipped & ~(1u << k));
      target = link_to(*e.router, then_set.routes[k]);
      if (!links_.can_send(target) || held_for(target, id)) continue;
      version = e.router->version();
      return true;
    }
  }
  return false;
}

bool RequestFlow::same_members(const Router& then, const ReplicaSet& then_set,
                               const ReplicaSet& now_set) const {
  if (then_set.size != now_set.size) return false;
  for (uint32_t k = 0; k < then_set.size; ++k) {
    if (!member_of(*router_, now_set, then.table().servers[then_set.routes[k].server])) {
      return false;
    }
  }
  return true;
}

bool RequestFlow::joined_in_grace(uint64_t id, const ServerInfo& member, int64_t now_ns) const {
  if (!routing_ || !router_) return false;
  const ReplicaSet now_set = router_->replica_set(id);
  for (const auto& e : routing_->earlier) {
    if (now_ns >= e.grace_until_ns) continue;
    const ReplicaSet then_set = e.router->replica_set(id);
    if (same_members(*e.router, then_set, now_set)) continue;
    if (!member_of(*e.router, then_set, member)) return true;
  }
  return false;
}

void RequestFlow::next_old_delete(uint32_t index, int64_t now_ns, FlowActions& out) {
  if (delete_old_copy(index, now_ns, out)) return;
  Request& r = slots_[index];
  r.stage = Request::Stage::kNewDelete;
  r.flags = 0;
  forward(index, now_ns, out);
}

bool RequestFlow::delete_old_copy(uint32_t index, int64_t now_ns, FlowActions& out) {
  Request& r = slots_[index];
  LinkTarget target;
  uint64_t version = 0;
  if (!earlier_owner(r.ask.user_id, r.earlier, r.earlier_member, now_ns, target, version)) {
    return false;
  }
  r.stage = Request::Stage::kOldDelete;
  r.flags = frame::kFlagAnyOwner;
  send(index, target, version, out);
  arm_hedge(index, now_ns);
  return true;
}

bool RequestFlow::delete_left_copy(uint32_t index, uint64_t their_version, FlowActions& out) {
  // A LOGOUT's copy refused with MOVED by a server whose table (ours too by now) no longer places
  // the id on it: it keeps its copy until a purge, and a fallback read in the grace period would
  // find the user there (issue 33: a member frozen while the replica count went from 3 to 2).
  // Deleted as an old copy (kFlagAnyOwner), as a LOGOUT during a grace period does; nobody waits.
  // Not a LOGIN's or HEARTBEAT's: the old copy may be the only one of the user's previous write
  // until the stream has moved it, and this write may not have landed anywhere.
  Request& r = slots_[index];
  if (r.type != FrameType::kDelete || r.flags != 0 || !router_ || version() < their_version) {
    return false;
  }
  const LinkTarget target = sent_to_now(r);
  if (!target.server || router_->holds(r.ask.user_id, target.current) || !links_.can_send(target)) {
    return false;
  }
  r.stage = Request::Stage::kRepair;
  r.flags = frame::kFlagAnyOwner;
  send(index, target, version(), out);
  return true;
}

bool RequestFlow::try_fallback_read(uint32_t index, bool missed, int64_t now_ns, FlowActions& out) {
  // During the grace period a lookup that misses at the new owner is retried at the owner under
  // the previous table(s): a user who logged in before the move is never missing.
  Request& r = slots_[index];
  if (r.type != FrameType::kGet || !router_ || !routing_ || routing_->earlier.empty()) return false;
  LinkTarget target;
  uint64_t version = 0;
  const ServerInfo& answered = read_member(r);
  if (!earlier_owner(r.ask.user_id, r.earlier, r.earlier_member, now_ns, target, version, &answered,
                     missed, first_try_server(r), &r.earlier_slow)) {
    return false;
  }
  ++counters_.fallback_reads;
  r.stage = Request::Stage::kFallback;
  r.flags = frame::kFlagAnyOwner;
  send(index, target, version, out);
  if (missed) arm_hedge(index, now_ns);
  return true;
}

void RequestFlow::hedge_fallback(const Timer& t, int64_t now_ns, FlowActions& out) {
  // A fallback read after a definite miss that its earlier member has not answered within the
  // hedge delay (a lossy or slow link; nemesis runs: drains under loss on another host's link,
  // dozens of TIMEOUTs): the next member of the same earlier table is asked too, in a slot that
  // now answers the client, within the same deadline; the slow one's OK, if it comes first, is
  // still the answer (first_try_answers). Only after a miss at a current member: that miss says
  // no write reached the id's new set since the move, so every member of the earlier set holds
  // what it held then, the same writes. Not one of an older table, which stopped getting writes
  // earlier, and not after NOT_READY, which says nothing about writes since the move: asked
  // because another was slow, such a member answered with an older endpoint (1f27b00 hedged
  // both, and a long run read 184 stale endpoints).
  Request& slow = slots_[t.index];
  if (slow.miss_stands) {  // a dropped member's miss, not contradicted in time (on_answer)
    frame::Response miss;
    miss.status = FrameStatus::kNotFound;
    reply_answer(t.index, miss, now_ns, out);
    return;
  }
  uint8_t from = slow.earlier;
  uint8_t member = slow.earlier_member;
  uint8_t skipped = slow.earlier_slow;
  LinkTarget target;
  uint64_t version = 0;
  const ServerInfo& answered = read_member(slow);
  if (!earlier_owner(slow.ask.user_id, from, member, now_ns, target, version, &answered,
                     /*missed=*/true, first_try_server(slow), &skipped) ||
      from != slow.earlier) {
    return;  // no other in that table: the slow one's answer is awaited
  }
  const uint32_t next = take_over(t.index);  // may move slots_
  Request& first = slots_[t.index];
  Request& n = slots_[next];
  n.stage = Request::Stage::kFallback;
  n.flags = frame::kFlagAnyOwner;
  n.member = first.member;
  n.earlier = from;
  n.earlier_member = member;
  n.earlier_slow = skipped;
  first.stage = Request::Stage::kAbandoned;
  first.hedged_to = next;
  first.hedged_to_gen = n.generation;
  ++counters_.fallback_reads;
  send(next, target, version, out);
  const Request& sent = slots_[next];
  deadlines_.push(
      {next, sent.generation, sent.sends, t.at_ns - settings_.hedge_ns + settings_.park_ns});
}

void RequestFlow::read_repair(const Request& found_for, const frame::Response& found,
                              FlowActions& out) {
  // Copy the record to its owner and replicas, keeping its age, unless the user wrote there
  // meanwhile.
  const ClientAsk ask = found_for.ask;  // allocate() may move slots_: `found_for` is not used below
  const ReplicaSet set = router_->replica_set(ask.user_id);
  for (uint32_t i = 0; i < set.size; ++i) {
    const LinkTarget target = member_target(set.routes[i]);
    if (!links_.can_send(target)) continue;  // best effort: the next heartbeat writes it anyway
    const uint32_t index = allocate();
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
}

}  // namespace imhash
