// Handoff: one shard's part of its server's outbound stream (docs/design.md §4, "Streaming"). When
// the config server asks (a table change moved ids away, a drain, a server returning), the shard
// walks its store with a RecordStore::ScanCursor, in bounded steps between batches of requests, and
// cuts every record whose id another server owns under the current table into IMPORT batches for
// that owner's shard. The shard's stream sender (hash_server/stream_sender.h) delivers them and
// reports each batch's acknowledgement back; the handoff is done when the scan has ended and every
// batch it cut has been acknowledged. It deletes nothing: the old copies go with the purge that
// follows.
//
// Records present for the whole scan are each visited at least once (RecordStore's scan rule), so
// none is left behind; a record visited twice is sent twice, which the receiver takes as the same
// write. A newer table during the scan restarts it against that table, so "done at version V"
// means complete under V.
//
// Not thread-safe: every method runs on the owning shard's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/frame_protocol.h"
#include "common/routing/router.h"
#include "common/routing/table.h"
#include "hash_server/record_store.h"

namespace imhash {

class Handoff {
 public:
  enum class State : uint8_t { kIdle, kRunning, kDone, kCancelled };
  // Records per IMPORT batch: the receiving shard stores a batch in one turn of its event loop, so
  // a batch is small enough (~50-150 us) that requests queued behind it barely notice.
  static constexpr uint16_t kBatchRecords = 256;
  static_assert(kBatchRecords <= frame::kMaxImportRecords);

  // One IMPORT's worth of records for one shard of one server.
  struct Batch {
    uint64_t generation = 0;  // of the scan that cut it (a restart makes older batches moot)
    uint64_t seq = 0;         // within the shard, to match its acknowledgement
    uint64_t version = 0;     // the table it was cut under (the receiver drops ids a table at
                              // least as new does not place there)
    ServerInfo target;        // the owner, as the table names it (address, shard count)
    uint16_t target_shard = 0;
    uint16_t count = 0;
    std::vector<uint8_t> records;  // frame::append_import_record x count
  };

  struct Progress {
    State state = State::kIdle;
    uint64_t version = 0;    // the table the scan runs against
    uint64_t scanned = 0;    // slots
    uint64_t total = 0;      // slots (an estimate until done)
    uint64_t cut = 0;        // records put into batches
    uint64_t acked = 0;      // records acknowledged by their owners
    uint64_t restarts = 0;   // scans started again by a newer table or a lost link
    uint32_t in_flight = 0;  // batches cut and not yet acknowledged
  };

  // Starts (or restarts from the beginning) a scan against `router`, owned by server `self_index`
  // of its table (-1: not in it, every record goes). Keeps acked and per-target counts only across
  // restarts of the same stream (`fresh` false).
  //
  // With replicas (router->replicas() > 1) a record goes to each member of its replica set but
  // this server that may lack it. `history` is the table the last completed stream ran against
  // (or the first table this server ran, while it was empty) and every table run since, oldest
  // first: a member that held the id under each of them has had every write to it, so it is
  // skipped. Empty: unknown, every other member is sent the record. After a lost link (the
  // target may have restarted empty) the rescan sends every record to every other member. The
  // servers named in `lost` restarted empty: they are sent every record they should hold.
  //
  // `self_in_history`: this server's index in each table of `history` (-1: not in it). Given, a
  // record of an id this server held under none of them is not sent: it is an old copy awaiting
  // its purge, which missed every write since the change that took the id away (a nemesis run:
  // the copies went from 3 to 2, a drain followed before the purge, and the dropped copies were
  // streamed to the drain's new owners: 26 LOGOUTs undone).
  void start(std::shared_ptr<const Router> router, int self_index, const RecordStore& store,
             bool fresh, const std::vector<std::shared_ptr<const Router>>& history = {},
             const std::vector<std::string>& lost = {}, std::vector<int> self_in_history = {});
  void cancel();
  // Examines at most `max_slots` slots and appends the batches that filled to `out` (at the end
  // of the scan, every partial batch too). Returns the number of records cut.
  size_t step(RecordStore& store, size_t max_slots, std::vector<Batch>& out);
  // A batch of this generation was acknowledged (`records` records). Stale generations are
  // ignored. `link_lost`: the connection to its owner broke while the stream ran, so the owner
  // may have lost what it had received: the scan runs once more when this one ends.
  void acknowledged(uint64_t generation, uint16_t records, const std::string& target,
                    bool link_lost);

  // A link to one of the targets was lost and made again while the stream ran: the target may have
  // lost what it had received, so the scan runs once more when this one ends.
  void link_lost() {
    if (running()) rescan_ = true;
  }

  bool running() const { return progress_.state == State::kRunning; }
  // Running with its scan still under way (not just waiting for acknowledgements).
  bool scanning() const { return running() && !cursor_.done; }
  uint64_t generation() const { return generation_; }
  const Progress& progress() const { return progress_; }
  const Router* router() const { return router_.get(); }
  const std::shared_ptr<const Router>& router_ptr() const { return router_; }
  // The `lost` of the last start().
  const std::vector<std::string>& lost() const { return lost_; }
  // Records acknowledged per target server name, for this stream.
  const std::vector<std::pair<std::string, uint64_t>>& targets() const { return targets_; }

 private:
  void emit(size_t buffer, std::vector<Batch>& out);
  // Appends `id`'s record to the open batch of `route`.
  void cut(uint64_t id, const RecordStore::Record& r, const Route& route, std::vector<Batch>& out);
  // With replicas: whether server `member` (an index in router_'s table) held `id` under every
  // table of the history.
  bool held_throughout(uint64_t id, uint32_t member) const;
  // Whether this server held `id` under some table of the history (true when that is unknown).
  bool held_since_last_stream(uint64_t id) const;
  // With replicas, for a server not in `id`'s set now (its copy is an old one: a member that left
  // the set, awaiting the purge): whether a member of `set` other than `lost` (one back empty) held
  // the id throughout, and so refills it with every write since. The old copy is then not sent:
  // it may be older than theirs and arrive after them, and within one second a streamed copy
  // cannot tell which is newer (a nemesis run: the copies went from 3 to 2, a server came back
  // empty, and the third's old copy of a heartbeat's second was kept over the newer one).
  bool refilled_by_others(uint64_t id, const ReplicaSet& set, uint32_t lost) const;
  // Done once the scan has ended and nothing is in flight; or, after a lost link, once more.
  void maybe_finish();
  void restart_scan();

  Progress progress_;
  std::shared_ptr<const Router> router_;
  const RecordStore* store_ = nullptr;
  int self_index_ = -1;
  RecordStore::ScanCursor cursor_;
  uint64_t generation_ = 0;
  uint64_t next_seq_ = 0;
  bool rescan_ = false;
  bool send_all_ = false;  // a rescan after a lost link: the history proves nothing
  // The history's tables, and for each the index there of every server of router_'s table (-1:
  // not in it).
  std::vector<std::shared_ptr<const Router>> history_;
  std::vector<std::vector<int>> history_index_;
  std::vector<std::string> lost_;
  std::vector<int> self_in_history_;  // start(): parallel to history_, or empty
  std::vector<bool> lost_index_;      // by server index in router_'s table
  // One open batch per (server, shard) of the table: buffers_[first_buffer_[server] + shard].
  std::vector<size_t> first_buffer_;
  std::vector<Batch> buffers_;
  std::vector<std::pair<std::string, uint64_t>> targets_;
};

const char* to_string(Handoff::State s);

}  // namespace imhash
