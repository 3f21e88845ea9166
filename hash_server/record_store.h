// RecordStore: one shard's records, user id -> (endpoint, last seen), in an extendible hash table
// of small Swiss-style segments, so that growth never stalls the shard and a record costs 22 to
// 25 bytes.
//
// Layout. h = mix64(id, HashSeed::kStore). A directory of 2^global_depth segment pointers is
// indexed by the top global_depth bits of h; a segment of local depth d holds every id whose h
// starts with its d-bit prefix, so it covers one contiguous interval of hash space and appears in
// 2^(global_depth - d) consecutive directory entries. Inside, a segment is an open-addressed table
// of `capacity` slots: one control byte per slot (0x80 empty, 0xFE deleted, 0b0fhhhhhh full: f the
// address family, 1 = IPv6, h six fingerprint bits of h) and one 18-byte packed slot (id u64,
// address u32, last_seen u32, port u16; an IPv6 address lives in the AddressPool and the slot
// holds its index). A lookup starts at fast_range(bits 6..37 of h, capacity) and reads 16 control
// bytes at a time (SSE2), stepping a group at a time; the first 15 control bytes are cloned after
// the end so a group read near the end needs no wrap logic. Deletes never move a record: a slot
// becomes EMPTY when no 16-slot window around it is full (no probe can have passed over it), else
// DELETED (abseil's rule), so churn leaves few tombstones.
//
// Growth is bounded per operation. Capacities come in size classes, a geometric series of ratio
// 9/8 from 16 to 7721 slots (kSizeClasses). An insert that would take the segment's used slots
// (records + tombstones) past 7/8 of its capacity rehashes that segment alone: in its own class
// when at most 25/32 of it are records (tombstones go), into the next class otherwise, and at the
// top class it splits into two segments of depth d + 1, each sized for its own records (the
// directory doubles first when d = global_depth: only pointers are copied). The longest stall is
// one rehash of about 6,800 records (~0.1 ms of CPU, plus the page faults of a fresh array). A
// segment below 3/8 full (after a delete, or when a scan leaves it) rehashes into the smallest
// class that holds its records at 3/4 load: far enough from the 7/8 growth point that a store does
// not alternate, and a purged store keeps at most 19 / (3/8) = 51 bytes per record however the
// deletes fell (a purge's scan shrinks each segment as it leaves it, so after a purge a segment is
// 2/3 to 3/4 full).
//
// Bursts. Records that arrive in hash order (a streaming move: the source's scan walks hash
// space in order, and both stores hash alike) all land in one segment until it splits, then in
// its upper half, and so on. Climbing class by class, such a segment was rebuilt about 30 times
// per split, and a sorted fill cost 550-650 ns a record against 380-480 for random ids. So a
// segment that fills again after fewer new records in the whole store than half its own
// (impossible when growth is spread over eight segments or more) jumps straight to the top
// class. A burst leaves each segment either split or partly filled in the top class; the
// segments it left are found at the next jumps (no record since the last look, note_jump) and
// rebuilt in the class their records fit, one per jump: an insert rebuilds at most two segments
// (the longest stall twice the one above). A sorted fill of 5M records: 120-160 ns a record,
// 23.8 bytes each (random: 23.7).
//
// Memory arithmetic. A slot costs 19 bytes with its control byte. Hashing is uniform, so all
// segments grow in lockstep and a segment runs between 7/8 full (just before it grows) and
// 7/8 / (9/8) = 0.78 full (just after): 21.7 to 24.4 bytes per IPv4 record, plus 16 for an IPv6
// address. Per segment: a 48-byte header and its pointer, the control bytes rounded up to 64 with
// their 15 clones, one or two 16-byte directory entries (about 0.03 bytes per record at 6,000
// records a segment). A directory entry holds a copy of its segment's control-array pointer and
// capacity, so a lookup goes from the directory straight to the segment's lines.
// The shard prefetches in two stages over a batch of requests: prefetch_group() loads each id's
// control group, then prefetch_record() reads it and loads only the slot lines its fingerprint
// matches (about 1.3 lines): GETs over 10M records 42-46 ns each in-process, against 47-54 when
// prefetch() loaded the control group and the two slot lines from the probe's start blind, and
// 45-47 for the old single array (docs/performance.md). Segment
// arrays come from SegmentArena (freed arrays go back to the kernel, so the resident size follows
// the records after a purge). Once the store holds 64 MiB, new arena chunks ask for transparent
// huge pages (each lookup touches a random slot; on the development VM huge pages took GETs over
// 10M ids from 0.99M/s to 1.50M/s), leaving at most one partly used 2 MiB chunk per size class.
// A lookup here reads a control line and a slot line where the old single array read one slot;
// 128-byte buckets that read one line pair measured no faster (docs/performance.md): the page
// walk is the cost, so the arena keeps huge chunks whole while the store grows (segment_arena.h).
//
// Scans (purges, and anything that must visit every record a bounded batch at a time) walk hash
// space in order with a ScanCursor: (start of the segment being scanned, slot index, that
// segment's generation). Every rehash, growth, shrink or split gives the segments involved a new
// generation; a cursor whose segment changed restarts that segment from its first slot, so a
// record present for the whole scan is visited at least once (perhaps twice), and since deletes
// never move records, erasing behind or ahead of the cursor skips nothing.
//
// Not thread-safe: all methods run on the owning shard's thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/endpoint.h"
#include "common/codec/hash.h"
#include "hash_server/address_pool.h"
#include "hash_server/segment_arena.h"

namespace imhash {

namespace store_detail {

// Slots per segment in each size class: 16, 18, 21, ..., 7721 (kTopClass), then larger classes
// that only a segment which may not split uses (see RecordStore::can_split).
struct SizeClasses {
  static constexpr size_t kMax = 160;
  std::array<uint32_t, kMax> capacity{};
  size_t count = 0;
  size_t top = 0;  // the largest class a segment grows to before it splits

  constexpr SizeClasses() {
    uint64_t c = 16;
    while (count < kMax && c < (uint64_t{1} << 30)) {
      capacity[count] = static_cast<uint32_t>(c);
      if (c <= 8192) top = count;
      ++count;
      const uint64_t next = (c * 9 + 7) / 8;
      c = next > c ? next : c + 1;
    }
  }
};
inline constexpr SizeClasses kSizeClasses{};

// Starts loading the cache line at `p`. __builtin_prefetch alone has no side effect as far as
// GCC 12's mod-ref analysis is concerned: a function that only prefetches is taken for pure and
// calls to it are deleted as dead code (the shard's whole prefetch pass vanished that way). The
// empty asm that "uses" the address keeps the call.
inline void prefetch_line(const void* p) {
  __builtin_prefetch(p);
  asm volatile("" : : "r"(p));
}

inline constexpr uint32_t kGroup = 16;      // control bytes probed at once
inline constexpr uint32_t kSlotBytes = 18;  // id 8, address 4, last_seen 4, port 2
inline constexpr uint8_t kEmpty = 0x80;
inline constexpr uint8_t kDeleted = 0xFE;
inline constexpr uint8_t kFamily6 = 0x40;  // in a full control byte
inline constexpr uint8_t kFingerprintMask = 0x3F;

}  // namespace store_detail

class RecordStore {
 public:
  struct Record {
    Endpoint endpoint;
    uint32_t last_seen = 0;  // Unix seconds
  };

  // Where a scan stands. A default-constructed cursor starts at the beginning of hash space.
  struct ScanCursor {
    uint64_t position = 0;    // first hash value of the segment being scanned
    uint32_t slot = 0;        // next slot of that segment to examine
    uint64_t generation = 0;  // of that segment when `slot` was set; 0: not entered yet
    bool done = false;        // every segment has been scanned
  };
  struct ScanStep {
    size_t examined = 0;  // slots
    size_t erased = 0;    // records
  };

  // What a store looks like inside, for tests and the documentation's arithmetic.
  struct Shape {
    size_t segments = 0;
    uint32_t global_depth = 0;
    size_t tombstones = 0;
    std::vector<size_t> segments_per_class;  // indexed by size class
  };

  RecordStore();
  ~RecordStore();
  RecordStore(RecordStore&& other) noexcept;
  RecordStore& operator=(RecordStore&&) = delete;
  RecordStore(const RecordStore&) = delete;

  // Stores or replaces the record; returns true when the id was new.
  bool upsert(uint64_t id, const Endpoint& endpoint, uint32_t last_seen);
  // Stores only when the id has no record; returns true when it stored.
  bool insert_if_absent(uint64_t id, const Endpoint& endpoint, uint32_t last_seen);
  // Stores unless the id's record was seen at `last_seen` or later (a streamed copy never
  // overwrites a newer write); one probe.
  enum class Merge : uint8_t { kInserted, kReplaced, kKeptNewer };
  Merge upsert_if_newer(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
    return upsert_if_newer(id, endpoint, last_seen, last_seen);
  }
  // The same, keeping a record seen at `keep_from` or later (a write known to the second only:
  // kept when the record's second began after it was made).
  Merge upsert_if_newer(uint64_t id, const Endpoint& endpoint, uint32_t last_seen,
                        uint32_t keep_from);
  // Erases unless the id's record was seen at `keep_from` or later; one probe.
  enum class Erase : uint8_t { kErased, kAbsent, kKeptNewer };
  Erase erase_unless_seen_from(uint64_t id, uint32_t keep_from);
  // Returns false when the id has no record.
  bool get(uint64_t id, Record& out) const;
  // Returns false when the id had no record.
  bool erase(uint64_t id);

  // Starts loading the lines a lookup of `id` reads first (its control group and the slots at the
  // start of its probe) without waiting for them. In a store of many megabytes each of those is a
  // cache and TLB miss; the shard prefetches a batch's records first to overlap them.
  void prefetch(uint64_t id) const {
    const uint64_t h = hash_of(id);
    const Table& t = directory_[h >> dir_shift_];
    const uint32_t start = probe_start(h, t.capacity);
    const uint8_t* slot = t.slots() + size_t{start} * store_detail::kSlotBytes;
    store_detail::prefetch_line(t.ctrl + start);
    store_detail::prefetch_line(t.ctrl + start + store_detail::kGroup - 1);
    store_detail::prefetch_line(slot);
    store_detail::prefetch_line(slot + 64);
  }

  // The first stage of a two-stage prefetch: the id's control group alone. prefetch_record(id),
  // called once that line has had time to arrive (a batch later), then loads exactly the slot
  // lines its fingerprint matches.
  void prefetch_group(uint64_t id) const {
    const uint64_t h = hash_of(id);
    const Table& t = directory_[h >> dir_shift_];
    const uint32_t start = probe_start(h, t.capacity);
    store_detail::prefetch_line(t.ctrl + start);
    store_detail::prefetch_line(t.ctrl + start + store_detail::kGroup - 1);
  }
  void prefetch_record(uint64_t id) const;

  size_t size() const { return size_; }
  // Slots over all segments.
  size_t capacity() const { return capacity_; }
  // Bytes held by segments, their headers, the directory and the IPv6 pool.
  size_t memory_bytes() const;

  // Examines up to `max_slots` slots from `cursor` on, in hash order, calling
  // `visit(id, record)` for each record; a visit that returns true erases that record. Advances the
  // cursor (cursor.done once the last segment is finished). The visitor must not touch the store.
  // Records present for the whole scan are each visited at least once; records inserted or
  // rehashed meanwhile may be visited twice, or (if inserted behind the cursor) not at all.
  template <typename Visitor>
  ScanStep scan(ScanCursor& cursor, size_t max_slots, Visitor&& visit);
  // An estimate of the slots a scan from `cursor` still has to examine (for progress reports).
  size_t slots_ahead(const ScanCursor& cursor) const;

  Shape shape() const;
  // Checks every internal invariant (counts, control byte clones, each record in the segment of
  // its hash prefix and reachable by its probe, directory structure); returns "" or what is wrong.
  std::string check() const;

 private:
  // Where a segment's arrays are: all that a lookup needs. The directory holds a copy of each
  // segment's Table, so a lookup reads its directory entry and then the segment's own lines, with
  // no segment header in between (a dependent load, and a line per segment to keep cached).
  struct Table {
    uint8_t* ctrl = nullptr;  // capacity + kGroup - 1 control bytes, then the slots, one block
    uint32_t capacity = 0;
    uint32_t segment = 0;  // index in segments_
    uint8_t* slots() const { return ctrl + ctrl_bytes(capacity); }
  };
  struct Segment {
    Table table;
    uint32_t size = 0;
    uint32_t tombstones = 0;
    uint32_t growth_left = 0;  // EMPTY slots that may still be filled before the 7/8 limit
    uint8_t size_class = 0;
    uint8_t local_depth = 0;
    uint64_t generation = 0;
    uint64_t prefix = 0;    // the top local_depth bits of its records' hashes
    uint64_t built_at = 0;  // the store's inserts_ when this segment's array was made
    uint64_t first_hash() const { return local_depth == 0 ? 0 : prefix << (64 - local_depth); }
  };

  static uint64_t hash_of(uint64_t id) { return mix64(id, HashSeed::kStore); }
  static uint32_t probe_start(uint64_t h, uint32_t capacity) {
    return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(h >> 6)} * capacity) >> 32);
  }
  static uint8_t fingerprint(uint64_t h) { return h & store_detail::kFingerprintMask; }
  static bool is_full(uint8_t c) { return (c & 0x80) == 0; }
  static size_t block_bytes(size_t size_class);
  static constexpr size_t ctrl_bytes(uint32_t capacity) {
    return (size_t{capacity} + store_detail::kGroup - 1 + 63) / 64 * 64;
  }

  // Slot fields, unaligned and packed.
  static uint64_t slot_id(const uint8_t* s) {
    uint64_t v;
    std::memcpy(&v, s, 8);
    return v;
  }
  static uint8_t* slot(const Table& t, uint32_t i) {
    return t.slots() + size_t{i} * store_detail::kSlotBytes;
  }
  Record record_at(const Table& t, uint32_t i) const;
  void write_slot(const Table& t, uint32_t i, uint64_t id, uint64_t h, const Endpoint& e,
                  uint32_t last_seen);
  static void set_ctrl(const Table& t, uint32_t i, uint8_t c) {
    t.ctrl[i] = c;
    if (i < store_detail::kGroup - 1) t.ctrl[t.capacity + i] = c;
  }

  const Table& table_of(uint64_t h) const { return directory_[h >> dir_shift_]; }
  Segment& segment_of(uint64_t h) const { return *segments_[table_of(h).segment]; }
  // The slot holding `id`, or UINT32_MAX.
  static uint32_t find(const Table& t, uint64_t id, uint64_t h);
  // The first EMPTY or DELETED slot of h's probe sequence.
  static uint32_t find_free(const Table& t, uint64_t h);
  // Inserts a record known to be absent, making room first when its segment is full.
  void insert_new(uint64_t id, uint64_t h, const Endpoint& e, uint32_t last_seen);
  void erase_at(Segment& s, uint32_t i);
  // After deletes: shrinks `s` when it is below 3/8 full.
  void maybe_shrink(Segment& s);
  // Makes room for one more record in `s`: rehash in place, grow or split.
  void make_room(Segment& s);
  // Rebuilds `s` with capacity class `size_class` (smaller, equal or larger).
  void rehash(Segment& s, size_t size_class);
  // A burst jumped `s` to the top class: remembers it, and rebuilds the segments earlier bursts
  // jumped and then left (no record since the last look) in the class their records fit, one
  // per call.
  void note_jump(const Segment& s);
  bool can_split(const Segment& s) const;
  void split(Segment& s);
  void double_directory();
  // Copies s's Table into its directory entries (after its arrays moved).
  void publish(const Segment& s);
  // Allocates a segment's block, all slots EMPTY.
  void init_segment(Segment& s, size_t size_class);
  void free_segment_block(Segment& s);
  // Moves one full slot's record into `to`, which must have room (no growth).
  void move_slot(const Table& from, uint32_t i, Segment& to);
  void account_growth();

  // Scan helpers: the segment at the cursor (restarting it if it changed), and leaving it.
  Segment& scan_enter(ScanCursor& c);
  void scan_leave(ScanCursor& c, Segment& s);

  std::vector<Table> directory_;  // 2^global_depth_ entries
  std::vector<std::unique_ptr<Segment>> segments_;
  uint32_t global_depth_ = 1;
  uint32_t dir_shift_ = 63;  // 64 - global_depth_
  size_t size_ = 0;
  uint64_t inserts_ = 0;  // new records ever stored, to tell a burst into one segment (make_room)
  // Segments a burst jumped to the top class, until it has left them (note_jump).
  struct Jumped {
    uint32_t segment = 0;
    uint32_t size = 0;  // its records when last looked at
    uint64_t generation = 0;
  };
  std::vector<Jumped> jumped_;
  size_t capacity_ = 0;
  uint64_t next_generation_ = 1;
  std::unique_ptr<SegmentArena> arena_;
  AddressPool v6_;
};

template <typename Visitor>
RecordStore::ScanStep RecordStore::scan(ScanCursor& c, size_t max_slots, Visitor&& visit) {
  ScanStep step;
  while (!c.done && step.examined < max_slots) {
    Segment& s = scan_enter(c);
    const Table& t = s.table;
    const uint32_t end =
        static_cast<uint32_t>(std::min<size_t>(t.capacity, c.slot + (max_slots - step.examined)));
    step.examined += end - c.slot;
    for (; c.slot < end; ++c.slot) {
      if (!is_full(t.ctrl[c.slot])) continue;
      if (visit(slot_id(slot(t, c.slot)), record_at(t, c.slot))) {
        erase_at(s, c.slot);  // moves nothing; a shrink waits until the scan leaves the segment
        ++step.erased;
      }
    }
    if (c.slot == t.capacity) scan_leave(c, s);
  }
  return step;
}

}  // namespace imhash
