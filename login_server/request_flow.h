// RequestFlow: the life of every client request in a login worker, from its datagram to its reply
// (docs/design.md, "The request flow"). It decides which hash server shard each request goes to
// under the current table, what each answer means — MOVED: retry once under a newer table, parked
// until it arrives; NOT_FOUND during a grace period: a fallback read at an earlier owner, and a
// read repair when that finds the user; LOGOUT during a grace period: delete the old copies first —
// and which reply the client gets.
//
// With replicas (Router::replicas() > 1) an id has a replica set, owner first. A write goes to
// every member whose link can take it: the first such member's answer is the reply, the others get
// copies nobody waits for. A read goes to the first member that can take it, and on to the next one
// when that member fails or answers neither OK, NOT_FOUND nor MOVED. A member that has not answered
// within the hedge delay is not waited for: the request goes on to the next member, within the
// same deadline (see "Hedging" below). Earlier owners are the members of the earlier tables' sets
// that are not in the current one.
//
// It owns no socket, no clock and no lock: the worker feeds it datagrams, hash server answers,
// link failures and the time, and carries out the actions it returns (send this frame on that
// shard's link, reply to this client, fetch a newer table). So every path can be driven by a unit
// test (tests/unit/request_flow_test.cpp).
//
// Thread rules: one RequestFlow per worker; every method runs on that worker's thread (checked in
// debug builds).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/codec/frame_protocol.h"
#include "common/codec/thread_check.h"
#include "common/security/token.h"
#include "login_server/client_addr.h"
#include "login_server/flow_trace.h"
#include "login_server/login_counters.h"
#include "login_server/rate_limiter.h"
#include "login_server/request_plan.h"
#include "login_server/routing_state.h"

namespace imhash {

// A link as the flow names it: one shard of one hash server. `current` is the server's index in
// the current table when the server is there (the worker keeps its links in that order), or
// kNotCurrent for a server only an earlier table has (a fallback read or old-copy delete).
struct LinkTarget {
  static constexpr uint32_t kNotCurrent = UINT32_MAX;
  const ServerInfo* server = nullptr;
  uint32_t current = kNotCurrent;
  uint32_t shard = 0;
};

// What the flow asks of the links: how many frames for `target` can be sent now (0: the link is
// down or full)? Implemented by the worker; by a fake in tests. The answer is as of the call: the
// frames a flow call returns are submitted after it, so a caller that sends several frames to one
// target counts them against one answer.
class LinkView {
 public:
  virtual uint32_t room(const LinkTarget& target) const = 0;
  bool can_send(const LinkTarget& target) const { return room(target) > 0; }
  // Whether the link's first connection is still being made: a link of a server the table just
  // added, which has never been up (not one that went down and is dialled again).
  virtual bool dialling(const LinkTarget& /*target*/) const { return false; }

 protected:
  ~LinkView() = default;
};

struct FlowAction {
  enum Kind : uint8_t {
    kSend,       // put `frame` on target's link, answered (or failed) later under `token`
    kReply,      // send reply[0..reply_size) to `to`
    kNeedTable,  // a hash server has table `version`, newer than ours: fetch it
  };
  Kind kind = kReply;
  // kSend
  LinkTarget target;
  frame::Request frame;  // correlation left to the link
  uint64_t token = 0;
  // kReply
  ClientAddr to;
  client::Status status = client::Status::kOk;
  uint8_t reply_size = 0;
  uint8_t reply[client::kMinDatagram];
  // kNeedTable
  uint64_t version = 0;
};
using FlowActions = std::vector<FlowAction>;

struct FlowSettings {
  // How long a request that met MOVED waits for the newer table (the request deadline).
  int64_t park_ns = 100'000'000;
  // Requests parked at most; beyond that a MOVED request is answered UNAVAILABLE.
  uint32_t max_parked = 4096;
  // With replicas: a member that has not answered a request within this long is not waited for;
  // the next member gets the request, and the client's answer still comes within park_ns of the
  // first try (--hedge-ms; 0: off, a member is left only when it fails).
  int64_t hedge_ns = 0;
  // Empty: authentication off. Otherwise LOGIN/HEARTBEAT/LOGOUT need a TOKEN MACed with this key.
  std::vector<uint8_t> auth_key;
  RateLimit rate_limit;  // rate 0: off
  // Writes for a member out of reach are held and replayed (docs/design.md §3); false only as a
  // defect put back for the history checker's tests (common/runtime/defects.h).
  bool hold_writes = true;
  // --trace-failed-requests: each request whose client hears TIMEOUT or UNAVAILABLE is told step
  // by step (take_failure_reports). Costs a string per step: for tracing faults.
  bool trace_failed = false;
};

class RequestFlow {
 public:
  RequestFlow(const FlowSettings& settings, const LinkView& links, LoginCounters& counters);

  // A new table is current (the worker has links to all its servers). Requests parked for it go
  // out again; requests in flight finish on the version they were sent under.
  void set_routing(std::shared_ptr<const RoutingState> routing, int64_t now_ns, FlowActions& out);
  uint64_t version() const { return routing_ ? routing_->version() : 0; }

  // A datagram from `from`, received at `now_ns` (steady clock) and `unix_now` (wall clock
  // seconds, for token expiry).
  void on_datagram(std::span<const uint8_t> datagram, const ClientAddr& from, int64_t now_ns,
                   uint32_t unix_now, FlowActions& out);
  // The answer to the frame sent under `token`.
  void on_answer(uint64_t token, const frame::Response& response, int64_t now_ns, FlowActions& out);
  // The frame sent under `token` got no answer: TIMEOUT (its deadline passed) or UNAVAILABLE (the
  // link went down or closed).
  void on_failure(uint64_t token, client::Status status, int64_t now_ns, FlowActions& out);
  // A write whose TIMEOUT was reported was processed after all / was lost with its connection
  // (HashLink: "unsettled"). A lost one is held for its member, as a write whose link broke.
  void on_settled(uint64_t token);
  void on_lost(uint64_t token, int64_t now_ns);
  // Such a write's own answer, late: settled, unless it was refused MOVED (not applied: held for
  // its member under the table the answer names, or its old copy deleted, as a copy's would be).
  void on_late_answer(uint64_t token, const frame::Response& response, int64_t now_ns,
                      FlowActions& out);
  // Answers TIMEOUT to parked requests whose wait is over, and sends the writes held for
  // replicas whose links are back.
  void tick(int64_t now_ns, FlowActions& out);
  // The adapter's Unix clock minus its monotonic one (the clock of every now_ns), so that writes
  // say when they were made in Unix time (kFlagTimed), which members compare across login
  // servers. Set before the first request and then now and again (a clock step moves it).
  void set_wall_clock_offset(int64_t unix_minus_monotonic_ns) {
    wall_offset_ns_ = unix_minus_monotonic_ns;
  }
  // Writes held for replicas out of reach (hints), over all of them.
  size_t hints() const;
  // Adds the writes held for each server, by name (summed over its shards), to `out`.
  void add_held_writes(std::map<std::string, uint64_t>& out) const;

  // Requests not answered yet (on links or parked): a stopping worker waits for 0. Writes kept
  // after their client heard TIMEOUT (kUnsettled) are not waited for.
  size_t active() const { return used_ - unsettled_; }
  // With settings.trace_failed: the stories of the requests answered TIMEOUT or UNAVAILABLE since
  // the last call, one line each (empty without it).
  std::vector<std::string> take_failure_reports() {
    return trace_ ? trace_->take_reports() : std::vector<std::string>{};
  }
  size_t parked() const { return parked_.size(); }

 private:
  // A client request (or a read repair, or a write's copy to a replica) between its datagram and
  // its reply.
  struct Request {
    enum class Stage : uint8_t {
      kFirst,         // sent under the current table
      kFallback,      // a LOOKUP missed at the owner: asking the owner under an earlier table
      kRepair,        // copying a record a fallback read found to its owner or a replica (nobody
                      // waits for it)
      kOldDelete,     // LOGOUT during a grace period: deleting the copy at an earlier owner first,
                      // so no fallback read finds the user once the client is told it logged out
      kNewDelete,     // ... then at the owner (as kFirst, without repeating the step above)
      kReplicaWrite,  // a write's copy to another member of the replica set (nobody waits for it)
      kAbandoned,     // a read whose member was too slow: the next member answers the client
      kUnsettled,     // a write that timed out (its client, if any, heard so), kept until its link
                      // says whether it was processed or lost with its connection
    };
    ClientAsk ask{};
    ClientAddr client{};
    frame::FrameType type = frame::FrameType::kPing;
    Stage stage = Stage::kFirst;
    bool retried = false;        // re-sent once after MOVED, under a newer table
    bool hedged = false;         // took over from a member too slow to answer (once per request)
    uint32_t took_over = 0;      // hedged: the slot of the try it took over from, and its
    uint32_t took_over_gen = 0;  // generation (a read's first try is still on its way)
    uint32_t hedged_to = 0;      // kAbandoned: the slot that took the client over, and its
    uint32_t hedged_to_gen = 0;  // generation
    bool parked = false;         // in parked_, waiting for a newer table
    bool in_doubt = false;       // kFallback after NOT_READY: a miss there is no answer
    // kFallback: a member the id's set dropped missed, and a member of that set still is asked:
    // within the hedge delay, else the miss is the answer (miss_ends_earlier_set).
    bool miss_stands = false;
    uint8_t flags = 0;           // frame flags (kFlagAnyOwner, kFlagIfAbsent)
    uint8_t earlier = 0;         // kFallback/kOldDelete: the next earlier table to consult
    uint8_t earlier_member = 0;  // ... and the next member of its replica set
    uint8_t earlier_slow = 0;    // kFallback: members of that set passed over as slow (bits)
    uint8_t member = 0;          // kFirst/kNewDelete: the member of the current set it went to
    uint32_t age_seconds = 0;    // kRepair: the age of the record copied
    // A client's write, and its copies and holds: when its datagram arrived. Sent as the write's
    // age (kFlagTimed), so a member applies writes of one user in the order they were made.
    int64_t made_ns = 0;
    int64_t received_ns = 0;  // for the latency histogram (0: a repair)
    uint32_t generation = 0;  // of the slot, so a stale token finds nothing
    uint32_t sends = 0;       // frames sent so far: a timer set at one send finds it moved on
    uint64_t write_seq = 0;   // a client's write: its place among this flow's writes
    bool live = false;
    // The link it was last sent on: its server's index in table `link_version` (kNotCurrent: a
    // server only an earlier table has) and shard. A write whose frame never reached the server
    // is held for it (see hold_again).
    uint32_t link_server = LinkTarget::kNotCurrent;
    uint32_t link_shard = 0;
    uint64_t link_version = 0;
  };
  // Hedging. A client's request (kFirst or kNewDelete, with replicas) whose member has not
  // answered after hedge_ns is sent to the next member of its set that can take it, in a new slot
  // that takes over the client; the first try stays on its link in a slot nobody waits for (a
  // read: kAbandoned; a write: kReplicaWrite, so a failure there is held for that member like any
  // copy's). A write's second copy at the next member is the same write (idempotent, as in
  // write_next_member). The new slot answers TIMEOUT when park_ns has passed since the first
  // try, whatever its own link's deadline and whatever it tried since (the next member after
  // NOT_READY, a fallback read); not while parked after MOVED, which has its own. So a frozen or
  // slow member costs its reads and writes hedge_ns, not the deadline, while another member of the
  // set answers. Both queues are in time order (one delay for all): tick() looks at their fronts
  // only.
  struct Timer {
    uint32_t index;
    uint32_t generation;
    uint32_t sends;  // the request's sends when set: a request that moved on is not touched
    int64_t at_ns;
  };
  // A FIFO without allocation once grown: pops move a head, pushes reuse the space before it.
  class TimerQueue {
   public:
    bool due(int64_t now_ns) const {
      return head_ < items_.size() && items_[head_].at_ns <= now_ns;
    }
    Timer pop() { return items_[head_++]; }
    void push(const Timer& t) {
      if (head_ == items_.size()) {
        items_.clear();
        head_ = 0;
      }
      if (head_ > 0 && items_.size() == items_.capacity()) {
        items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
      items_.push_back(t);
    }

   private:
    std::vector<Timer> items_;
    size_t head_ = 0;
  };

  // A request that met MOVED, waiting until `until_ns` for a table of at least `version` (the one
  // the hash server named): a table in between does not release it, as the server would only
  // answer MOVED again. Or one waiting for a member's first connection (wait_for_dialled_member):
  // `version` is the current one, which any table releases.
  struct Parked {
    uint32_t index;
    int64_t until_ns;
    uint64_t version;
  };
  // Hinted hand-off: a write for a member whose link cannot take it is held here, and every later
  // write for that member is held too, until the link is back; then they go before anything else
  // is sent to it (tick, forward). So a member that was out of reach for a while (a link that
  // broke, a server that restarted empty and is being refilled) misses no write, and a held LOGOUT
  // reaches it before any later read does. Only the latest write of each id is kept (a record is
  // its last write; writes of different ids commute), so a queue holds at most one entry per user
  // written meanwhile: at most kMaxHints users per member, beyond that a write is dropped and
  // counted. A write that failed UNAVAILABLE (its link broke, or it was never submitted because
  // the link was full) is held again too, unless a later write of the id is held already; one
  // that timed out is not (it may still be applied, and a replay could undo a later write).
  // A copy refused MOVED by a member whose table is newer than the one it was sent under is held
  // too, until this flow runs that table: a member of the id's set under both tables streams
  // nothing to the other, so the copy would be lost when the answering member took the write
  // under the older table (a failover or a replica change while a login server lags).
  struct Hint {
    frame::FrameType type = frame::FrameType::kUpsert;
    uint64_t id = 0;
    Endpoint endpoint{};
    int64_t made_ns = 0;     // the write's (Request::made_ns)
    uint64_t write_seq = 0;  // of the write held: a later one replaces it, an earlier one not
  };
  struct HintQueue {
    std::string server, address;  // the member's identity (its table index may change)
    uint32_t shard = 0;
    std::unordered_map<uint64_t, Hint> hints;  // by id: its latest write
    uint64_t after_version = 0;  // replayed under a table at least this new (a MOVED named it)
  };
  static constexpr size_t kMaxHints = 262144;
  static Hint hint_of(const Request& write);

  int64_t wall_offset_ns_ = 0;  // set_wall_clock_offset
  uint32_t allocate();
  void release(uint32_t index);
  Request* find(uint64_t token);
  uint64_t token_of(uint32_t index) const;

  void forward(uint32_t index, int64_t now_ns, FlowActions& out);
  void send(uint32_t index, const LinkTarget& target, uint64_t table_version, FlowActions& out);
  // During grace periods: a member of `id`'s replica set under an earlier table (from table
  // `from`, member `member` on, newest table first) that can be reached; advances the cursor past
  // it. For a delete (`answered` null): one not in the id's set now (those get the delete
  // anyway). For a read that current member `answered` missed or could not serve: one other than
  // it, current or not, under an earlier table whose set for the id differs from today's, and
  // (when it `missed`: NOT_FOUND) does not have `answered` in it either; nor `waiting`, the
  // server a hedged read's first try still waits on (its answer is on its way already).
  // A read (`slow_skipped` set) asks a member that is slow (is_slow) after the set's others: the
  // bits of those it passed over, asked once the set's others are.
  bool earlier_owner(uint64_t id, uint8_t& from, uint8_t& member, int64_t now_ns,
                     LinkTarget& target, uint64_t& version, const ServerInfo* answered = nullptr,
                     bool missed = false, const ServerInfo* waiting = nullptr,
                     uint8_t* slow_skipped = nullptr) const;
  // Slow members: a request to one went unanswered for hedge_ns (a hedge fired), and nothing has
  // come from it since. A fallback read asks the other members of an earlier set first (a nemesis
  // run: lookups in a grace period fell back to a server cut from the login servers 250 ms
  // before, the last of its set, and timed out). Few at a time: the oldest mark goes past kMaxSlow.
  void mark_slow(const Request& r);
  void clear_slow(const Request& r);
  bool is_slow(const LinkTarget& target) const;
  // The server a hedged read's first try (abandoned, still on its way) was sent to; null when
  // `r` is no hedged read or its first try is over.
  const ServerInfo* first_try_server(const Request& r) const;
  // Whether `member` joined `id`'s replica set since a table still in its grace period (the set
  // then differs from today's and did not have it): it may not have been streamed the id yet, so
  // its NOT_FOUND is no answer.
  bool joined_in_grace(uint64_t id, const ServerInfo& member, int64_t now_ns) const;
  // Whether `then_set` under `then` and today's `now_set` have the same members.
  bool same_members(const Router& then, const ReplicaSet& then_set,
                    const ReplicaSet& now_set) const;
  // The current member that slot `r`'s read was last sent to.
  const ServerInfo& read_member(const Request& r) const;
  // Whether fallback read `r`'s miss is the answer of the earlier set it asked: its member is a
  // member of the id's current set too, or none of that set is.
  bool miss_ends_earlier_set(const Request& r) const;
  bool delete_old_copy(uint32_t index, int64_t now_ns, FlowActions& out);
  // A LOGOUT done with one old copy: the next one's delete, or (none left) the current members'.
  void next_old_delete(uint32_t index, int64_t now_ns, FlowActions& out);
  // A new slot with the id, endpoint, frame type and write sequence of slot `index`: a copy for
  // another member, or (take_over) a hedge. May move slots_.
  uint32_t copy_of(uint32_t index);
  // A new slot that carries on the client request in slot `index` (a hedge): its client, its
  // write's place, its receive time; counted as hedged. `index`'s slot is the caller's to change.
  uint32_t take_over(uint32_t index);
  // A hedged request's first try answered while the slot that took it over still waits: that
  // answer is the client's (true), and the other slot is left in turn (a read's abandoned, a
  // write's a copy for its member). The caller says which answers count.
  bool first_try_answers(uint32_t index);
  // A hedged read whose member could not serve it (a failure, NOT_READY, a miss that is no
  // answer), with no other to ask: its client goes back to the first try, if that is still on its
  // way (true), instead of hearing UNAVAILABLE or NOT_FOUND.
  bool back_to_first_try(uint32_t index);
  // A LOGOUT's old-copy delete unanswered after hedge_ns: the LOGOUT goes on without it.
  void skip_old_delete(const Timer& t, int64_t now_ns, FlowActions& out);
  // A fallback read after a definite miss, unanswered after hedge_ns: the next member of the same
  // earlier table is asked too.
  void hedge_fallback(const Timer& t, int64_t now_ns, FlowActions& out);
  // `missed`: the member answered NOT_FOUND (not NOT_READY, which is no answer).
  bool try_fallback_read(uint32_t index, bool missed, int64_t now_ns, FlowActions& out);
  // A LOGOUT's copy answered MOVED by a server no longer placed on the id: its old copy deleted.
  bool delete_left_copy(uint32_t index, uint64_t their_version, FlowActions& out);
  void write_replicas(uint32_t index, const ReplicaSet& set, uint32_t from, FlowActions& out);
  // One server under two tables: the same name at the same address (the worker's links are per
  // name, address and shards).
  static bool same_server(const ServerInfo& a, const ServerInfo& b);
  // Whether `server` is one of `set`'s members under `table_of` (the router the set came from).
  static bool member_of(const Router& table_of, const ReplicaSet& set, const ServerInfo& server);
  // Whether two targets are one link (a server by name and address, and a shard).
  static bool same_link(const LinkTarget& a, const LinkTarget& b);
  // The index in hint_queues_ of the member's queue of held writes (size(): none).
  size_t hint_queue_of(const LinkTarget& target) const;
  // The member's queue of held writes, or null.
  HintQueue* hints_for(const LinkTarget& target);
  // Whether a write of `id` is held for the member: it may answer for the id from before it.
  bool held_for(const LinkTarget& target, uint64_t id) const;
  // Holds `write` for `target`, unless a later write of the id (by write_seq) is held already.
  void hold(const LinkTarget& target, const Request& write);
  void hold(const LinkTarget& target, const Hint& write);
  // A write held for a member that missed it: held too for each member of the id's set now that
  // was not in it under `then` (they are streamed the id, maybe from the member that missed it).
  void hold_for_new_members(const Router& then, const Hint& write, const std::string& held_for,
                            const std::string& held_for_address);
  // The same for every write held when the table changes from `then` to the current one.
  void hold_for_new_members(const Router& then);
  // The write in slot `index` failed UNAVAILABLE on its link, or was lost with it after it timed
  // out: held for that member again.
  void hold_again(uint32_t index);
  // The copy in slot `index` was refused MOVED by a member running table `their_version`: held
  // for it until this flow runs that table, if that is newer than the one the copy went under.
  void hold_until_table(uint32_t index, uint64_t their_version);
  // The link `r` was last sent on, as the current table has it (same server name, address and
  // shards; found through the table it was sent under, current or earlier), or none.
  LinkTarget sent_to_now(const Request& r) const;
  // Sends the target's held writes while its link has room, keeping `reserve` frames of it for
  // the caller; true when none is left.
  bool replay_hints(const LinkTarget& target, FlowActions& out, uint32_t reserve = 0);
  // A member a frame may go to now: its link takes frames and nothing is held for it (held
  // writes are sent first, leaving room for that frame).
  bool ready(const LinkTarget& target, FlowActions& out);
  bool read_next_member(uint32_t index, int64_t now_ns, FlowActions& out);
  // No member of the id's set can take the request now, but one's link is being dialled: the
  // request waits for it, parked under the current version, within its deadline (true); false
  // when none is dialled or too many are parked.
  bool wait_for_dialled_member(uint32_t index, const ReplicaSet& set, int64_t now_ns);
  // Requests waiting so go out once a member of their set can take them or none is dialled any
  // more (then they fail UNAVAILABLE, as they would have at once).
  void release_link_waits(int64_t now_ns, FlowActions& out);
  // After a client request's send: its hedge timer, when hedging applies to it.
  void arm_hedge(uint32_t index, int64_t now_ns);
  // Its member has not answered in time: the request goes to the next member (see "Hedging").
  void hedge(const Timer& t, int64_t now_ns, FlowActions& out);
  // A live request at the send a timer was set at, or null.
  Request* at_send(const Timer& t);
  // A write whose answering member's link failed goes to the next member that can take it.
  bool write_next_member(uint32_t index, int64_t now_ns, FlowActions& out);
  void read_repair(const Request& found_for, const frame::Response& found, FlowActions& out);
  void need_table(uint64_t their_version, FlowActions& out) const;
  void on_moved(uint32_t index, uint64_t their_version, int64_t now_ns, FlowActions& out);
  void reply_answer(uint32_t index, const frame::Response& response, int64_t now_ns,
                    FlowActions& out);
  void fail(uint32_t index, client::Status status, int64_t now_ns, FlowActions& out);
  // A write's frame timed out: its client (if any) hears TIMEOUT, and the slot stays, kUnsettled,
  // until its link tells on_settled or on_lost. False for anything else (not kept).
  bool keep_unsettled(uint32_t index, int64_t now_ns, FlowActions& out);
  // The kUnsettled write in slot `index` got its answer after all (on_late_answer, or on_answer
  // after the flow's own deadline).
  void settle_answered(uint32_t index, const frame::Response& response, FlowActions& out);
  FlowAction& reply_action(const ClientAddr& to, client::Status status, FlowActions& out);
  LinkTarget member_target(const Route& route) const;

  const FlowSettings& settings_;
  const LinkView& links_;
  LoginCounters& counters_;
  ThreadCheck thread_;

  std::shared_ptr<const RoutingState> routing_;
  const Router* router_ = nullptr;       // routing_->current
  std::unique_ptr<TokenMac> token_mac_;  // keyed once; null: authentication off
  std::unique_ptr<FlowTrace> trace_;     // settings.trace_failed; null: off
  // With trace_: the time of the event being handled, and a step of slot `index`'s story.
  void trace_now(int64_t now_ns) {
    if (trace_) trace_->set_now(now_ns);
  }
  void trace(uint32_t index, const char* what, const char* detail = nullptr) {
    if (trace_) trace_->note(index, what, detail);
  }
  // Slot `index`'s client hears `status`: its story is reported when that is a failure.
  void report_failure(uint32_t index, client::Status status);
  RateLimiter limiter_;

  std::vector<Request> slots_;  // grows to the most requests ever in flight at once
  std::vector<uint32_t> free_;  // free slot indexes
  size_t used_ = 0;
  size_t unsettled_ = 0;  // slots in kUnsettled, among used_
  uint64_t writes_ = 0;   // client writes so far: the next one's write_seq
  // The latest client write of recent ids, direct-mapped by id (a later id in the same place
  // forgets the earlier): a copy refused MOVED is held for its member only if its id has not
  // been written since (hold_until_table). Set once, at construction.
  struct LatestWrite {
    uint64_t id = 0;
    uint64_t write_seq = 0;
  };
  static constexpr size_t kLatestWrites = size_t{1} << 16;
  std::vector<LatestWrite> latest_writes_;
  std::vector<Parked> parked_;          // MOVED, waiting (bounded in time) for a newer table
  std::vector<HintQueue> hint_queues_;  // members with held writes (few: those out of reach)
  struct SlowMark {  // a server, every shard of it: a cut or frozen host is slow on each link
    std::string server, address;
  };
  static constexpr size_t kMaxSlow = 32;
  std::vector<SlowMark> slow_;  // is_slow; empty while every member answers in time
  TimerQueue hedges_;           // client requests to send on to the next member at at_ns
  TimerQueue deadlines_;        // hedged requests to answer TIMEOUT at at_ns
};

}  // namespace imhash
