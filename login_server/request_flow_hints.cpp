// RequestFlow's writes kept for a member that cannot take them now (request_flow.h, "Hinted
// hand-off"): the hint queues, holding a write (again), replaying them once the member's link
// takes frames, and writes that timed out, kept until their link settles or loses them. The
// rest of the flow is in request_flow.cpp.
#include <algorithm>

#include "login_server/request_flow.h"

namespace imhash {

using client::Status;
using frame::FrameType;

void RequestFlow::on_settled(uint64_t token) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const Request* r = find(token);
  if (!r || r->stage != Request::Stage::kUnsettled) return;
  --unsettled_;
  release(static_cast<uint32_t>(token));
}

void RequestFlow::on_lost(uint64_t token, int64_t /*now_ns*/) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const Request* r = find(token);
  if (!r || r->stage != Request::Stage::kUnsettled) return;
  const auto index = static_cast<uint32_t>(token);
  // It may have been applied or not, and nothing sent after it on that connection was answered:
  // held for the member like a write whose link broke under it (the later write of the id by
  // sequence wins, so holding it cannot undo a newer one).
  ++counters_.writes_lost_after_timeout;
  hold_again(index);
  --unsettled_;
  release(index);
}

void RequestFlow::on_late_answer(uint64_t token, const frame::Response& response,
                                 int64_t /*now_ns*/, FlowActions& out) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const Request* r = find(token);
  if (!r || r->stage != Request::Stage::kUnsettled) return;
  settle_answered(static_cast<uint32_t>(token), response, out);
}

void RequestFlow::settle_answered(uint32_t index, const frame::Response& response,
                                  FlowActions& out) {
  --unsettled_;
  if (response.status == frame::FrameStatus::kMoved) {
    // Refused, so not applied there: as a replica's copy refused MOVED (a stalled login server
    // whose frames to a member timed out across a table change lost them this way).
    need_table(response.table_version, out);
    slots_[index].stage = Request::Stage::kReplicaWrite;
    if (delete_left_copy(index, response.table_version, out)) return;
    hold_until_table(index, response.table_version);
  }
  release(index);
}

bool RequestFlow::keep_unsettled(uint32_t index, int64_t now_ns, FlowActions& out) {
  Request& r = slots_[index];
  const bool client_write =
      r.stage == Request::Stage::kFirst || r.stage == Request::Stage::kNewDelete;
  if (r.type == FrameType::kGet || r.flags != 0 ||
      (!client_write && r.stage != Request::Stage::kReplicaWrite)) {
    return false;
  }
  if (client_write) {
    counters_.record_latency(now_ns - r.received_ns);
    report_failure(index, Status::kTimeout);
    FlowAction& a = reply_action(r.client, Status::kTimeout, out);
    a.reply_size = static_cast<uint8_t>(reply_with_status(r.ask, Status::kTimeout, a.reply));
  } else {
    ++counters_.replica_write_failures;
  }
  slots_[index].stage = Request::Stage::kUnsettled;
  ++unsettled_;
  return true;
}

size_t RequestFlow::hints() const {
  size_t n = 0;
  for (const HintQueue& q : hint_queues_) n += q.hints.size();
  return n;
}

void RequestFlow::add_held_writes(std::map<std::string, uint64_t>& out) const {
  for (const HintQueue& q : hint_queues_) out[q.server] += q.hints.size();
}

size_t RequestFlow::hint_queue_of(const LinkTarget& target) const {
  for (size_t i = 0; i < hint_queues_.size(); ++i) {
    const HintQueue& q = hint_queues_[i];
    if (q.shard == target.shard && q.server == target.server->name &&
        q.address == target.server->address) {  // a queue keeps the names, not a ServerInfo
      return i;
    }
  }
  return hint_queues_.size();
}

RequestFlow::Hint RequestFlow::hint_of(const Request& write) {
  return Hint{write.type, write.ask.user_id, write.ask.endpoint, write.made_ns, write.write_seq};
}

bool RequestFlow::held_for(const LinkTarget& target, uint64_t id) const {
  const size_t i = hint_queue_of(target);
  return i < hint_queues_.size() && hint_queues_[i].hints.contains(id);
}

RequestFlow::HintQueue* RequestFlow::hints_for(const LinkTarget& target) {
  const size_t i = hint_queue_of(target);
  return i < hint_queues_.size() ? &hint_queues_[i] : nullptr;
}

void RequestFlow::hold(const LinkTarget& target, const Request& write) {
  hold(target, hint_of(write));
}

void RequestFlow::hold(const LinkTarget& target, const Hint& write) {
  if (!settings_.hold_writes) {
    ++counters_.hints_dropped;
    return;
  }
  HintQueue* q = hints_for(target);
  if (!q) {
    q = &hint_queues_.emplace_back();
    q->server = target.server->name;
    q->address = target.server->address;
    q->shard = target.shard;
  }
  const auto it = q->hints.find(write.id);
  // Writes fail in the order they were sent, so a later write of the id may be held already (the
  // link was full, then broke with an earlier one on it), or come after (two writes of the id on
  // a link that breaks): the later one by sequence is the record, whichever arrives last here.
  if (it != q->hints.end() && it->second.write_seq > write.write_seq) return;
  if (it == q->hints.end() && q->hints.size() >= kMaxHints) {
    ++counters_.hints_dropped;
    return;
  }
  if (it == q->hints.end()) {
    q->hints.emplace(write.id, write);
  } else {
    it->second = write;  // the later write is the record
  }
  ++counters_.hints_queued;
}

void RequestFlow::hold_for_new_members(const Router& then, const Hint& write,
                                       const std::string& held_for,
                                       const std::string& held_for_address) {
  // A member that missed a write keeps its older record, and when a table change gives the id a
  // new member, streams it there; the write's replay reaches only the member it is held for, so
  // the new one would keep the older record for good, a LOGOUT undone (a nemesis run: a LOGOUT
  // held for hash1, cut from the login servers, while hash4 was drained and added back; hash1
  // streamed the user to hash4, which answered it for 20 s). The new member gets the write too:
  // it keeps the later of the two by when each was made, so the stream's older copy, arriving
  // after, does not undo it.
  const ReplicaSet then_set = then.replica_set(write.id);
  const ReplicaSet now_set = router_->replica_set(write.id);
  for (uint32_t k = 0; k < now_set.size; ++k) {
    const ServerInfo& member = router_->table().servers[now_set.routes[k].server];
    if (member.name == held_for && member.address == held_for_address) continue;
    if (!member_of(then, then_set, member)) hold(member_target(now_set.routes[k]), write);
  }
}

void RequestFlow::hold_again(uint32_t index) {
  // Writes only, with replicas only (one copy has no other to fall behind: the client, told
  // UNAVAILABLE, tries again), and only plain ones: old-copy deletes and repairs are best effort.
  // After a table change it is held for the same server if the table still has it (the change
  // streams records only to members new to an id: one that merely missed a write would keep the
  // older record); for a server that has left, not at all.
  const Request& r = slots_[index];
  if (r.type == FrameType::kGet || r.flags != 0 || !router_ || router_->replicas() == 1) return;
  const LinkTarget target = sent_to_now(r);
  if (target.server) hold(target, r);
  // Members the id gained since the table it was sent under: hold_for_new_members.
  if (r.link_version == router_->version() || r.link_server == LinkTarget::kNotCurrent) return;
  for (const auto& e : routing_->earlier) {
    const Router& then = *e.router;
    if (then.version() != r.link_version || r.link_server >= then.table().servers.size()) continue;
    const ServerInfo& sent = then.table().servers[r.link_server];
    hold_for_new_members(then, hint_of(r), sent.name, sent.address);
  }
}

void RequestFlow::hold_for_new_members(const Router& then) {
  // A table change: every write held now, for members new to its id under the new table.
  struct Held {
    std::string server, address;
    Hint write;
  };
  std::vector<Held> held;  // hold() may add queues
  for (const HintQueue& q : hint_queues_) {
    for (const auto& [id, h] : q.hints) held.push_back({q.server, q.address, h});
  }
  for (const Held& h : held) hold_for_new_members(then, h.write, h.server, h.address);
}

void RequestFlow::hold_until_table(uint32_t index, uint64_t their_version) {
  // Refused under a table no newer than the one it went under: the member does not hold the id
  // (a move streams the record to whoever does). Else it may hold it under the newer table too.
  // Nor when the table it names is ours already and leaves the member out of the id's set: the
  // members under it have the write (the answering copy retries on MOVED) or get it streamed.
  // Nor when the id has been written since: that write reaches the member (sent after this copy,
  // or held and replayed in order, or retried after its own MOVED), and this older copy, held now
  // and replayed after it, would undo it (a nemesis run: 7 stale reads).
  const Request& r = slots_[index];
  if (!router_ || r.link_version >= their_version) return;
  const LatestWrite& latest = latest_writes_[r.ask.user_id & (kLatestWrites - 1)];
  if (latest.id == r.ask.user_id && latest.write_seq > r.write_seq) return;
  const LinkTarget target = sent_to_now(r);
  if (!target.server ||
      (version() >= their_version && !router_->holds(r.ask.user_id, target.current))) {
    return;
  }
  hold_again(index);
  if (HintQueue* q = hints_for(target)) {
    q->after_version = std::max(q->after_version, their_version);
  }
}

LinkTarget RequestFlow::sent_to_now(const Request& r) const {
  if (r.link_server == LinkTarget::kNotCurrent) return {};
  const Router* then = r.link_version == router_->version() ? router_ : nullptr;
  for (size_t i = 0; !then && i < routing_->earlier.size(); ++i) {
    if (routing_->earlier[i].router->version() == r.link_version) {
      then = routing_->earlier[i].router.get();
    }
  }
  if (!then || r.link_server >= then->table().servers.size()) return {};
  const ServerInfo& sent = then->table().servers[r.link_server];
  const int i = router_->table().server_index(sent.name);
  if (i < 0) return {};
  const ServerInfo& now = router_->table().servers[static_cast<size_t>(i)];
  if (!same_server(now, sent) || now.shards != sent.shards) return {};
  return LinkTarget{&now, static_cast<uint32_t>(i), r.link_shard};
}

bool RequestFlow::replay_hints(const LinkTarget& target, FlowActions& out, uint32_t reserve) {
  if (hint_queues_.empty()) return true;
  HintQueue* q = hints_for(target);
  if (!q) return true;
  if (router_->version() < q->after_version) return false;  // its table has not come yet
  // The link's room as of now, less the frames for it this call has returned already (they are
  // submitted after it: a write whose first member is not ready asks again for its copy). Frames
  // beyond the room would fail, and be held again, for nothing.
  const uint32_t room = links_.room(target);
  uint32_t taken = reserve;
  for (const FlowAction& a : out) {
    taken += a.kind == FlowAction::kSend && same_link(a.target, target);
  }
  for (uint32_t budget = room > taken ? room - taken : 0; !q->hints.empty() && budget > 0;
       --budget) {
    const auto first = q->hints.begin();
    const Hint h = first->second;
    q->hints.erase(first);
    const uint32_t copy = allocate();
    Request& c = slots_[copy];
    c.ask.user_id = h.id;
    c.ask.endpoint = h.endpoint;
    c.type = h.type;
    c.write_seq = h.write_seq;
    c.stage = Request::Stage::kReplicaWrite;
    c.made_ns = h.made_ns;  // sent with its age: the member keeps a write made after it
    ++counters_.hints_replayed;
    send(copy, target, router_->version(), out);
  }
  if (!q->hints.empty()) return false;
  hint_queues_.erase(hint_queues_.begin() + (q - hint_queues_.data()));
  return true;
}

bool RequestFlow::ready(const LinkTarget& target, FlowActions& out) {
  return links_.can_send(target) && replay_hints(target, out, /*reserve=*/1);
}

bool RequestFlow::same_link(const LinkTarget& a, const LinkTarget& b) {
  return a.shard == b.shard && same_server(*a.server, *b.server);
}

}  // namespace imhash
