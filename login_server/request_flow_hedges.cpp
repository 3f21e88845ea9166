// RequestFlow's hedging (request_flow.h, "Hedging"; docs/design.md, "The request flow"): a
// request whose member has not answered within hedge_ns goes on to the next member in a slot
// that takes its client over, and whichever try answers first is the client's answer. The rest
// of the flow is in request_flow.cpp.
#include "login_server/request_flow.h"

namespace imhash {

using frame::FrameStatus;
using frame::FrameType;

void RequestFlow::arm_hedge(uint32_t index, int64_t now_ns) {
  const Request& r = slots_[index];
  // An old-copy delete is bounded too, with one copy or more (skip_old_delete).
  const bool old_delete = r.stage == Request::Stage::kOldDelete;
  // A fallback read is armed only after a definite miss (try_fallback_read): hedge_fallback.
  const bool fallback = r.stage == Request::Stage::kFallback;
  if (settings_.hedge_ns <= 0 ||
      (!old_delete && !fallback &&
       (r.hedged || router_->replicas() == 1 || r.flags != 0 ||
        (r.stage != Request::Stage::kFirst && r.stage != Request::Stage::kNewDelete)))) {
    return;
  }
  hedges_.push({index, r.generation, r.sends, now_ns + settings_.hedge_ns});
}

uint32_t RequestFlow::copy_of(uint32_t index) {
  const uint32_t next = allocate();  // may move slots_
  const Request& from = slots_[index];
  Request& c = slots_[next];
  c.ask = from.ask;
  c.type = from.type;
  c.write_seq = from.write_seq;
  c.made_ns = from.made_ns;
  return next;
}

uint32_t RequestFlow::take_over(uint32_t index) {
  const uint32_t next = copy_of(index);
  const Request& from = slots_[index];
  Request& c = slots_[next];
  c.client = from.client;
  c.retried = from.retried;
  c.hedged = true;
  c.received_ns = from.received_ns;
  c.took_over = index;
  c.took_over_gen = from.generation;
  ++counters_.hedged;
  if (trace_) {
    trace_->inherit(next, index);
    trace_->note(next, "hedged");
  }
  return next;
}

bool RequestFlow::first_try_answers(uint32_t index) {
  // A CI run under ASan: a hash server back empty answered the hedged read NOT_READY after the
  // slow first member had answered OK, which was dropped; the client heard UNAVAILABLE.
  Request& first = slots_[index];
  Request& next = slots_[first.hedged_to];
  if (!next.live || next.generation != first.hedged_to_gen || !next.hedged ||
      next.took_over != index || next.took_over_gen != first.generation) {
    return false;  // not a hedged first try, or its client has been answered
  }
  if (first.type != FrameType::kGet) {
    if (next.stage != Request::Stage::kFirst && next.stage != Request::Stage::kNewDelete) {
      return false;
    }
    first.stage = next.stage;
    next.stage = Request::Stage::kReplicaWrite;  // its answer or failure is its member's
    trace(index, "answers its client after all");
    return true;
  }
  if (next.stage != Request::Stage::kFirst && next.stage != Request::Stage::kFallback) {
    return false;
  }
  next.stage = Request::Stage::kAbandoned;
  next.hedged_to = index;
  next.hedged_to_gen = first.generation;
  first.stage = Request::Stage::kFirst;
  trace(index, "answers its client after all");
  return true;
}

const ServerInfo* RequestFlow::first_try_server(const Request& r) const {
  if (!r.hedged || r.type != FrameType::kGet) return nullptr;
  const Request& first = slots_[r.took_over];
  if (!first.live || first.generation != r.took_over_gen ||
      first.stage != Request::Stage::kAbandoned) {
    return nullptr;
  }
  return sent_to_now(first).server;
}

bool RequestFlow::back_to_first_try(uint32_t index) {
  const Request& r = slots_[index];
  if (!r.hedged || r.type != FrameType::kGet) return false;
  Request& first = slots_[r.took_over];
  if (!first.live || first.generation != r.took_over_gen ||
      first.stage != Request::Stage::kAbandoned) {
    return false;
  }
  // A nemesis-free CI run: the next member, being refilled, answered NOT_READY while the slow
  // owner's answer was still to come; the client heard UNAVAILABLE.
  first.stage = Request::Stage::kFirst;
  trace(r.took_over, "takes its client back");
  release(index);
  return true;
}

RequestFlow::Request* RequestFlow::at_send(const Timer& t) {
  Request& r = slots_[t.index];
  return r.live && r.generation == t.generation && r.sends == t.sends ? &r : nullptr;
}

void RequestFlow::hedge(const Timer& t, int64_t now_ns, FlowActions& out) {
  const Request* r = at_send(t);
  if (!r || !router_) return;  // answered, or moved on, meanwhile
  mark_slow(*r);
  if (r->stage == Request::Stage::kOldDelete) {
    skip_old_delete(t, now_ns, out);
    return;
  }
  if (r->stage == Request::Stage::kFallback) {
    hedge_fallback(t, now_ns, out);
    return;
  }
  // The next member of the set after the one it waits for; under a table that came meanwhile,
  // the first member that is not that one (a nemesis run found requests stuck on a cut member
  // because a range move had just changed the table).
  const LinkTarget waiting = sent_to_now(*r);
  const ReplicaSet set = router_->replica_set(r->ask.user_id);
  const uint32_t from = r->link_version == router_->version() ? r->member + 1u : 0;
  for (uint32_t i = from; i < set.size; ++i) {
    const LinkTarget target = member_target(set.routes[i]);
    if (waiting.server && same_link(target, waiting)) continue;
    if (!ready(target, out)) continue;  // may add slots: `r` is not used after it
    const uint32_t next = take_over(t.index);
    Request& first = slots_[t.index];
    slots_[next].stage = first.stage;
    slots_[next].member = static_cast<uint8_t>(i);
    // The first try goes on without anyone waiting for it; a write's stays a copy for its member.
    first.stage =
        first.type == FrameType::kGet ? Request::Stage::kAbandoned : Request::Stage::kReplicaWrite;
    first.hedged_to = next;
    first.hedged_to_gen = slots_[next].generation;
    send(next, target, router_->version(), out);
    const Request& sent = slots_[next];
    deadlines_.push(
        {next, sent.generation, sent.sends, t.at_ns - settings_.hedge_ns + settings_.park_ns});
    return;
  }
}

}  // namespace imhash
