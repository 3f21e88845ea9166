// ShardCore: the rules of one hash server shard (docs/design.md §2 and §4) — what each request
// gets (ownership and MOVED by table version, NOT_READY while being refilled), which deletes are
// remembered while ids move (tombstones), which streamed records an IMPORT may store (never over a
// newer write), the purge and the outbound stream with its pacing.
//
// It owns the shard's records and no socket, no clock, no thread and no log: the shard's adapter
// (hash_server/shard.h) feeds it frames, commands, acknowledgements and the time, and carries out
// what it asks for afterwards (Effects: report a snapshot, drop queued batches, schedule a purge or
// stream step, log an event). So every rule can be driven by a unit test
// (tests/unit/shard_core_test.cpp), and hash_server/CMakeLists.txt compiles it with
// common/codec/core_only.h, which makes a use of Asio, spdlog or a clock there a compile error.
//
// Thread rules: one ShardCore per shard; every method runs on that shard's thread (checked in
// debug builds). Time comes in as Unix seconds (`now_s`) for records and tombstones, and as a
// monotonic nanosecond count (`now_ns`) for the stream's pacing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/codec/frame_protocol.h"
#include "common/codec/thread_check.h"
#include "common/routing/control_protocol.h"
#include "common/routing/router.h"
#include "hash_server/handoff.h"
#include "hash_server/purge.h"
#include "hash_server/record_store.h"

namespace imhash {

struct ShardCounters {
  uint64_t upserts = 0, gets = 0, deletes = 0, moved = 0, purged = 0, bad_frames = 0;
  uint64_t tls_failures = 0;  // TLS handshakes that failed or timed out
  // Streaming in: records stored from IMPORTs, and those skipped (the shard held a newer record,
  // the id was deleted during the move, or it belongs to another shard).
  uint64_t imported = 0, import_skipped_newer = 0, import_skipped_deleted = 0;
  uint64_t import_wrong_shard = 0;
  uint64_t import_not_held = 0;  // cut under a table no newer than ours, which places it elsewhere
  uint64_t repairs_skipped_deleted = 0;  // read repairs of ids deleted during a move
  uint64_t tombstones_dropped = 0;       // deletes not remembered: the tombstone set was full
  uint64_t not_ready = 0;                // GET misses answered NOT_READY while being refilled
  uint64_t writes_superseded = 0;        // timed writes (kFlagTimed) not applied: a later one was
};

// Something the adapter logs: the core decides what happened, the adapter words it.
struct ShardEvent {
  enum Kind : uint8_t {
    kPurgeStarted,     // action, count: slots to examine
    kPurgeFinished,    // count: records deleted
    kStreamStarted,    // version: the table it runs against, count: records to examine
    kStreamCancelled,  //
    kStreamDone,       // count: records handed to their owners
    kStreamResent,     // a link broke during the stream (an acknowledgement said so)
    kStreamLinkLost,   // a stream link was lost and made again while the stream ran
  };
  Kind kind = kPurgeStarted;
  frame::PurgeAction action = frame::PurgeAction::kStatus;
  uint64_t version = 0;
  uint64_t count = 0;
};

class ShardCore {
 public:
  // Slots a purge step examines: about 50 µs of work, so requests queued behind a purge step wait
  // no longer than that.
  static constexpr size_t kPurgeBatchSlots = 4096;
  // Slots a stream step examines: like a purge step, tens of microseconds.
  static constexpr size_t kStreamStepSlots = 4096;
  // IMPORT batches of one shard in flight at once: enough to keep the links busy (64 x 256
  // records), few enough that a slow target holds little memory.
  static constexpr uint32_t kStreamWindow = 64;
  // Frames whose records are prefetched before the first of them is handled: enough to overlap
  // the misses of one pipelined batch, few enough that the slots are still cached when their turn
  // comes.
  static constexpr size_t kPrefetchBatch = 32;
  // Deletes are remembered for the push's grace period and this much more.
  static constexpr uint32_t kTombstoneSlackS = 60;
  static constexpr size_t kMaxTombstones = size_t{1} << 20;
  // Deletes made outside a move's window are kept this long (at most kMaxRecentDeletes of them),
  // so that a window opening soon after (a table change, records arriving) remembers them too.
  static constexpr uint32_t kRecentDeleteS = 10;
  static constexpr size_t kMaxRecentDeletes = size_t{1} << 16;
  static constexpr size_t kMaxStreamHistory = 16;

  // `stream_rate`: records per second this shard streams out (its share; 0: no limit).
  // `remember_deletes` false only as a defect put back (common/runtime/defects.h): no tombstones.
  ShardCore(uint32_t index, uint32_t shard_count, std::string server_name, double stream_rate,
            bool remember_deletes = true);
  ShardCore(const ShardCore&) = delete;
  ShardCore& operator=(const ShardCore&) = delete;

  // What the adapter does after a call, in this order: log `events`, tell the stream sender to
  // drop queued batches of generations before `drop_older`, report a snapshot (`changed`), and
  // schedule a purge step (`purge_step`) or ask next_stream_step() (`stream_step`).
  struct Effects {
    std::vector<ShardEvent> events;
    std::optional<uint64_t> drop_older;
    bool changed = false;
    bool purge_step = false;
    bool stream_step = false;
    bool empty() const {
      return events.empty() && !drop_older && !changed && !purge_step && !stream_step;
    }
  };
  // The effects of the calls since the last take_effects(); the adapter takes them after each call
  // (or each batch of frames), which leaves them empty; has_effects() costs the data path a few
  // compares a batch.
  bool has_effects() const { return !effects_.empty(); }
  Effects take_effects();

  // Where the table of recent writes keeps `id` (one entry an id; ids share entries).
  static size_t recent_write_slot(uint64_t id) {
    return static_cast<size_t>((id * 0x9E3779B97F4A7C15ULL) >> 48);  // 16 bits: 65,536 entries
  }

  // ---- requests ---------------------------------------------------------------------------
  // Prefetches the record slots of the keyed requests among the first frames of `frames` (up to
  // kPrefetchBatch); returns the size of the frames it looked at, 0 if the first is incomplete.
  size_t prefetch_records(std::span<const uint8_t> frames) const;
  // Decodes and answers one request into `out`; returns false when the frame is malformed (the
  // adapter closes the link). `now_ms`: Unix milliseconds when the batch was read.
  bool handle(const frame::Header& h, std::span<const uint8_t> body, std::vector<uint8_t>& out,
              uint64_t now_ms);
  // Figures of the adapter a STATS request reports (connections open, the longest turn).
  void set_serving_figures(uint64_t connections, uint64_t longest_turn_ns) {
    connections_ = connections;
    longest_turn_ns_ = longest_turn_ns;
  }

  // ---- commands ---------------------------------------------------------------------------
  // A new table. `grace`: how long login servers may still read the old owners (the push's
  // grace_ms); deletes are remembered that long and kTombstoneSlackS more, so no streamed copy or
  // read repair brings a logged-out user back.
  void set_router(std::shared_ptr<const Router> router, uint32_t grace_s, uint32_t now_s);
  // Starts or cancels a purge (from the config server, or a PURGE frame).
  void command_purge(frame::PurgeAction action, uint32_t age_seconds, uint64_t id);
  // Starts the outbound stream once the shard runs table `version` or newer (from the beginning,
  // if one runs), or cancels it. `lost`: servers that restarted empty (sent all they should hold).
  void command_stream(control::StreamAction action, uint64_t version,
                      std::vector<std::string> lost);
  // Replicas: while filling, a GET of an id this shard has no record of is answered NOT_READY (in
  // a table with replicas, or while it has no table at all).
  void set_filling(bool filling) { filling_ = filling; }
  // The stream sender's acknowledgement of a batch.
  void acknowledged(uint64_t generation, uint16_t records, const std::string& target,
                    bool link_lost);
  // A link the stream sends over was lost and made again: send everything again.
  void stream_link_lost();
  // Time passes (the adapter's sweep): tombstones whose time is up are forgotten.
  void tick(uint32_t now_s);
  // The adapter stops: the purge and the stream end where they are.
  void stop();

  // ---- steps ------------------------------------------------------------------------------
  // One step of the running purge; asks for the next one while it runs.
  void purge_step(uint32_t now_s);
  // What the stream needs next: nothing (idle, or its window of unacknowledged batches is full:
  // an acknowledgement resumes it), a step now, or a step after `wait_ns` (its rate limit: a
  // bucket of 10 ms worth of records, at least one batch, refilled at the rate).
  struct StreamNext {
    enum Kind : uint8_t { kIdle, kNow, kWait } kind = kIdle;
    int64_t wait_ns = 0;
  };
  StreamNext next_stream_step(int64_t now_ns);
  // One step of the stream: the IMPORT batches it cut, for the stream sender (moved out by the
  // caller before the next step).
  std::vector<Handoff::Batch>& stream_step(uint32_t now_s);

  // ---- figures ----------------------------------------------------------------------------
  const RecordStore& store() const { return store_; }
  const ShardCounters& counters() const { return counters_; }
  ShardCounters& counters() { return counters_; }  // the adapter counts bad frames and TLS
  const frame::PurgeProgress& purge_progress() const { return purge_.progress(); }
  uint64_t purge_id() const { return purge_id_; }
  const Handoff& handoff() const { return handoff_; }
  size_t tombstones() const { return tombstones_.size(); }
  const Router* router() const { return router_.get(); }

 private:
  Effects& effects() { return effects_; }
  void handle_import(const frame::Request& q);
  // Deletes are remembered (tombstones) while a move may still bring the id back; `made_s` is the
  // second the delete was made (a timed one's, else now).
  void remember_delete(uint64_t id, const frame::Request& q, uint32_t made_s);
  // A timed write (kFlagTimed) made at `made_ms` (Unix ms): applied unless a write of the id made
  // later was applied already; false when superseded.
  bool upsert_timed(uint64_t id, const Endpoint& endpoint, uint64_t made_ms);
  RecordStore::Erase erase_timed(uint64_t id, uint64_t made_ms);
  // When a timed write was made (Unix ms, never 0: 0 marks an empty entry), from the low 32 bits
  // the frame carries: the time within 24 days before now (one in the future — a login server's
  // clock ahead of ours — counts as now).
  uint64_t made_at(uint32_t made_low) const {
    const uint32_t age = static_cast<uint32_t>(now_ms_) - made_low;
    return age < (1u << 31) && now_ms_ > age ? now_ms_ - age : std::max<uint64_t>(now_ms_, 1);
  }

  // Our table is at least as new as `sender_version` and does not place `id` on this server.
  bool placed_elsewhere(uint64_t id, uint64_t sender_version) const;
  // On a new table: tombstones of ids it places elsewhere go (their owner remembers its deletes).
  void forget_tombstones_not_held();
  bool deleted_in_move(uint64_t id) const {
    return !tombstones_.empty() && tombstones_.count(id) != 0;
  }
  // A streamed copy of `id` last seen at `seen_s` is no newer than a delete remembered here (within
  // the delete's second the order is unknown: the delete wins, as the user asked for it last).
  bool deleted_since(uint64_t id, uint32_t seen_s) const {
    if (tombstones_.empty()) return false;
    const auto it = tombstones_.find(id);
    return it != tombstones_.end() && seen_s <= it->second;
  }
  void expire_tombstones();
  // With replicas, a write from a sender whose table is older than ours is answered MOVED even
  // when we hold the id: the sender fans the write out to the members of the id's set under its
  // table, and a member our table added would miss it. With one copy the owner check alone
  // does this (the old owner is not the owner). A sender without a table (version 0: a tool)
  // is taken at its word.
  bool stale_replica_write(const frame::Request& q) const {
    return router_->replicas() > 1 && q.table_version != 0 &&
           q.table_version < router_->version() &&
           (q.type == frame::FrameType::kUpsert || q.type == frame::FrameType::kDelete);
  }
  void fill_stats(frame::Response& r) const;
  // Tables run since the last stream completed (handoff.h, Handoff::start's `history`).
  void note_table_for_streams();
  void maybe_start_stream();
  // This server's index in each table of stream_history_ (-1: not in it), for Handoff::start.
  std::vector<int> self_in_history() const;
  // The stream has nothing left to send or to be acknowledged.
  void stream_finished();

  // Constant after construction.
  const uint32_t index_;
  const uint32_t shard_count_;
  const std::string server_name_;
  const double stream_rate_;  // records per second, this shard's share (0: no limit)

  ThreadCheck thread_check_;
  Effects effects_;

  RecordStore store_;
  Purge purge_;
  uint64_t purge_id_ = 0;
  Handoff handoff_;
  uint64_t stream_wanted_ = 0;  // a stream start waiting for this table version (0: none)
  double stream_tokens_ = 0;    // the rate limit's bucket, in records
  int64_t stream_refill_ns_ = 0;
  std::vector<Handoff::Batch> cut_;  // reused by stream steps
  // Ids deleted while records may still be streaming in, each with the second its delete was made
  // (all forgotten at tombstone_until_). A copy seen after that second is a login made since the
  // delete and is stored (a nemesis run: a user logged out at a member, logged in again while the
  // table had left that member out, and when the id came back the stream's copy of the new login
  // met the old delete's tombstone and was dropped; its next lookup there answered NOT_FOUND).
  std::unordered_map<uint64_t, uint32_t> tombstones_;
  bool remember_deletes_ = true;
  uint32_t tombstone_until_ = 0;  // deletes are remembered until then (Unix seconds)
  // Deletes made while no window was open, oldest first (a ring of kMaxRecentDeletes): a copy
  // holder that missed one (frozen, cut off) may stream its older record here once a move
  // starts; a nemesis run saw LOGOUTs undone so.
  struct RecentDelete {
    uint64_t id;
    uint32_t at_s;    // when it was applied here (it expires kRecentDeleteS after)
    uint32_t made_s;  // when the delete was made
  };
  std::vector<RecentDelete> recent_deletes_;
  size_t recent_head_ = 0;  // the oldest entry, once the ring is full
  // A window opens (tombstone_until_ moves past now): the recent deletes become tombstones.
  void open_tombstone_window(uint32_t until_s);
  std::shared_ptr<const Router> router_;
  int self_index_ = -1;
  // The table the last stream completed against (or the first this shard ran, while its store
  // was empty), then every table run since: what a replica may be assumed to hold (Handoff).
  // Empty: unknown, a stream sends every record to every member of its set.
  std::vector<std::shared_ptr<const Router>> stream_history_;
  // Servers that lost their records (StreamCommand::lost): every stream sends them all they
  // should hold, until one completes.
  std::vector<std::string> stream_lost_;
  bool filling_ = false;  // set_filling
  bool had_table_ = false;
  bool stopped_ = false;
  uint32_t now_ = 0;     // Unix seconds of the batch being handled
  uint64_t now_ms_ = 0;  // ... in milliseconds (handle only)
  // When the latest writes applied here were made (Unix ms; a timed write's from its age), by id,
  // direct-mapped: a timed write is compared with the id's latest one to the millisecond while
  // that one is still here, to the record's second after (upsert_timed). A delete is remembered
  // too, so a login made before it does not bring the user back.
  struct RecentWrite {
    uint64_t id = 0, made_ms = 0;  // made_ms 0: empty
  };
  static constexpr size_t kRecentWrites = 65536;  // 1 MiB a shard
  std::vector<RecentWrite> recent_writes_ = std::vector<RecentWrite>(kRecentWrites);
  RecentWrite& recent_write(uint64_t id) { return recent_writes_[recent_write_slot(id)]; }
  uint64_t connections_ = 0, longest_turn_ns_ = 0;  // set_serving_figures
  // The request being handled, reused: decode_request sets every field, and a Request built per
  // frame cost a 120-byte reset each time (handle is not re-entered).
  frame::Request request_;
  ShardCounters counters_;
};

}  // namespace imhash
