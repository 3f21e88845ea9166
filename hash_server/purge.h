// Purge: the state of one lazy, incremental purge of a shard's records (docs/design.md §4). The
// shard runs step() once per turn of its event loop, between batches of requests, so a purge of
// millions of records never holds the thread for more than one bounded batch. It walks the store
// with a RecordStore::ScanCursor, so every record present from the start to the end of the purge is
// judged, whatever requests insert, delete or rehash between steps.
//
// Not thread-safe: all methods run on the owning shard's thread.
#pragma once

#include <cstdint>
#include <memory>

#include "common/codec/frame_protocol.h"
#include "common/routing/router.h"
#include "hash_server/record_store.h"

namespace imhash {

class Purge {
 public:
  // What the shard knows when a step runs: ownership is judged against the table current at that
  // step, so a table change during a purge never deletes an id the server owns by then.
  struct Context {
    const Router* router = nullptr;  // nullptr: no table, the server owns every id
    int self_index = -1;             // this server in router->table().servers; -1: absent
    uint32_t now = 0;                // Unix seconds
  };

  // Starts (or restarts) a purge of `kind`; kOlderThan deletes records not refreshed for at least
  // `age_seconds`. Returns false for kStatus/kCancel, which are not purge kinds.
  bool start(frame::PurgeAction kind, uint32_t age_seconds, const RecordStore& store);
  void cancel();
  bool running() const { return progress_.state == frame::PurgeState::kRunning; }
  const frame::PurgeProgress& progress() const { return progress_; }

  // Examines at most `batch_slots` slots; returns the number of records deleted. Progress counts
  // slots: scanned so far, and total = scanned + the store's estimate of the slots still ahead
  // (segments rehashed meanwhile are scanned again, so total can move either way until DONE).
  size_t step(RecordStore& store, size_t batch_slots, const Context& ctx);

 private:
  bool doomed(uint64_t id, const RecordStore::Record& r, const Context& ctx) const;

  frame::PurgeProgress progress_;
  uint32_t age_seconds_ = 0;
  RecordStore::ScanCursor cursor_;
};

}  // namespace imhash
