// RecordStore: one shard's records, user id -> (endpoint, last seen), in an open-addressing hash
// table with linear probing and backward-shift deletion (no tombstones, so lookups stay short
// after heavy churn and a purge can delete while it scans).
//
// Memory: a slot is 24 bytes holding the id, an IPv4 address inline, the port and the last-seen
// second; the table doubles at 3/4 load, so it runs between 3/8 and 3/4 full (32–64 bytes per
// record, about 38 at 10 million records). IPv6 addresses live in a side pool (16 more bytes each,
// reused through a free list), since most clients are IPv4. Tables of 2 MiB and more ask for
// transparent huge pages (huge_page_allocator.h): each lookup probes a random slot.
//
// Not thread-safe: all methods run on the owning shard's thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/endpoint.h"
#include "hash_server/huge_page_allocator.h"

namespace imhash {

class RecordStore {
 public:
  struct Record {
    Endpoint endpoint;
    uint32_t last_seen = 0;  // Unix seconds
  };

  explicit RecordStore(size_t initial_capacity = 1024);

  // Stores or replaces the record; returns true when the id was new.
  bool upsert(uint64_t id, const Endpoint& endpoint, uint32_t last_seen);
  // Stores only when the id has no record; returns true when it stored.
  bool insert_if_absent(uint64_t id, const Endpoint& endpoint, uint32_t last_seen);
  // Returns false when the id has no record.
  bool get(uint64_t id, Record& out) const;
  // Returns false when the id had no record.
  bool erase(uint64_t id);
  // Starts loading the id's home slot into the cache without waiting for it. Each probe of a
  // table this size is otherwise a cache and TLB miss taken one request after another (about half
  // of a hash server's time at full load); prefetching a batch's slots first overlaps them.
  void prefetch(uint64_t id) const {
    const auto* slot = reinterpret_cast<const char*>(&slots_[home(id)]);
    __builtin_prefetch(slot);
    __builtin_prefetch(slot + sizeof(Slot) - 1);  // a slot may straddle two cache lines
  }

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }
  // Bytes held by the table and the IPv6 pool.
  size_t memory_bytes() const;
  // Changes whenever the table is rebuilt (growth), which invalidates slot positions.
  uint64_t generation() const { return generation_; }

  // Slot-level scan for incremental purges: examines up to `max_slots` slots starting at `cursor`,
  // erases each record for which `doomed(id, record)` is true, and advances `cursor`. After an
  // erase the same slot is examined again, since backward-shift deletion may have moved a later
  // record into it. Returns the number of records erased. Stops at capacity().
  template <typename Pred>
  size_t scan_erase(size_t& cursor, size_t max_slots, Pred&& doomed);

 private:
  struct Slot {
    uint64_t id;
    uint32_t addr;  // IPv4 address (host order), or index into v6_pool_
    uint32_t last_seen;
    uint16_t port;
    uint8_t family;  // 0: empty slot
    uint8_t unused;
  };
  static_assert(sizeof(Slot) == 24);

  size_t home(uint64_t id) const;
  // Index of the id's slot, or of the empty slot where it would go.
  size_t find(uint64_t id) const;
  void fill(Slot& s, uint64_t id, const Endpoint& endpoint, uint32_t last_seen);
  Endpoint endpoint_of(const Slot& s) const;
  void release_address(const Slot& s);
  void erase_at(size_t i);
  void grow();

  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::array<uint8_t, 16>> v6_pool_;
  std::vector<uint32_t> v6_free_;
};

template <typename Pred>
size_t RecordStore::scan_erase(size_t& cursor, size_t max_slots, Pred&& doomed) {
  size_t erased = 0;
  for (size_t examined = 0; examined < max_slots && cursor < slots_.size(); ++examined) {
    const Slot& s = slots_[cursor];
    if (s.family != 0 && doomed(s.id, Record{endpoint_of(s), s.last_seen})) {
      erase_at(cursor);
      ++erased;
      continue;  // a later record may have shifted into this slot
    }
    ++cursor;
  }
  return erased;
}

}  // namespace imhash
