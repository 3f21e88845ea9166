// RecordStore: one shard's records, user id -> (endpoint, last seen), in an extendible hash table
// of small segments of 128-byte buckets, so that growth never stalls the shard, a record costs
// 21 to 24 bytes, and a lookup reads one pair of cache lines.
//
// Layout. h = mix64(id, HashSeed::kStore). A directory of 2^global_depth segment pointers is
// indexed by the top global_depth bits of h; a segment of local depth d holds every id whose h
// starts with its d-bit prefix, so it covers one contiguous interval of hash space and appears in
// 2^(global_depth - d) consecutive directory entries. Inside, a segment is an array of buckets,
// open-addressed with linear probing from bucket to bucket. A bucket is 128 bytes, aligned to
// 128 (the pair of cache lines the hardware fetches together): seven records as columns (ids
// 7 x 8 bytes, then addresses 7 x 4, last seen 7 x 4, ports 7 x 2: 126 bytes, the 18-byte
// payload of a record and nothing more) and two bytes of metadata: which slots hold a record,
// which of those hold an IPv6 address (the slot then holds the address's index in the
// AddressPool), and an "overflowed" bit. A lookup starts at its home bucket (fast_range of bits
// 6..37 of h), compares the id with the seven ids, and goes on to the next bucket only while the
// bucket it left has overflowed: some insert found it full and went past it. The bit is sticky
// (a delete cannot know whether it removed the last record that went past) and is cleared when
// the segment is rebuilt; a segment whose overflowed bits grew by 1/8 of its buckets since it was
// built is rebuilt in place at its next insert. Deletes never move a record.
//
// Why buckets: the Swiss-style layout this replaced (control bytes apart from 18-byte slots) read
// a control line and one or two slot lines per lookup, and was slower per request than the
// single-array table before it; here a GET touches one line pair (one TLB entry), and 7 slots
// to the pair waste 2 bytes of 128.
//
// Growth is bounded per operation. Capacities come in size classes of whole buckets, a geometric
// series of ratio 9/8 from 2 to 1170 buckets (14 to 8190 slots, kSizeClasses). An insert that
// would take the segment's records past 7/8 of its slots rehashes that segment alone into the
// next class, and at the top class it splits it into two segments of depth d + 1, each sized for
// its own records (the directory doubles first when d = global_depth: only pointers are copied).
// The longest stall is one rehash of about 7,200 records (~0.1 ms of CPU, plus the page faults of
// a fresh array). A segment below 3/8 full (after a delete, or when a scan leaves it) rehashes
// into the smallest class that holds its records at 3/4 load: far enough from the 7/8 growth
// point that a store does not alternate, and a purged store keeps at most 18.3 / (3/8) = 49
// bytes per record however the deletes fell (a purge's scan shrinks each segment as it leaves
// it, so after a purge a segment is 2/3 to 3/4 full).
//
// Memory arithmetic. A slot costs 128 / 7 = 18.3 bytes. Hashing is uniform, so all segments grow
// in lockstep and a segment runs between 7/8 full (just before it grows) and 7/8 / (9/8) = 0.78
// full (just after): 20.9 to 23.5 bytes per IPv4 record, plus 16 for an IPv6 address. Per
// segment: a 56-byte header and one or two directory pointers (about 0.02 bytes per record at
// 6,000 records a segment). prefetch() loads the home bucket's two lines, which hold the record
// or answer the miss most of the time at these loads. Segment arrays come from SegmentArena
// (freed arrays go back to the kernel, so the resident size follows the records after a purge).
// Once the store holds 64 MiB, new arena chunks ask for transparent huge pages (each lookup
// touches a random bucket; on the development VM huge pages took GETs over 10M ids from 0.99M/s
// to 1.50M/s), leaving at most one partly used 2 MiB chunk per size class.
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

#include "common/endpoint.h"
#include "common/hash.h"
#include "hash_server/address_pool.h"
#include "hash_server/segment_arena.h"

namespace imhash {

namespace store_detail {

inline constexpr uint32_t kBucketSlots = 7;

// Slots per segment in each size class: whole buckets, 2, 3, 4, ..., 1170 buckets (kTopClass),
// each class at least 9/8 of the one before, then larger classes that only a segment which may
// not split uses (see RecordStore::can_split).
struct SizeClasses {
  static constexpr size_t kMax = 160;
  std::array<uint32_t, kMax> capacity{};  // slots
  size_t count = 0;
  size_t top = 0;  // the largest class a segment grows to before it splits

  constexpr SizeClasses() {
    uint64_t b = 2;  // buckets
    while (count < kMax && b * kBucketSlots < (uint64_t{1} << 30)) {
      capacity[count] = static_cast<uint32_t>(b * kBucketSlots);
      if (b * kBucketSlots <= 8192) top = count;
      ++count;
      const uint64_t next = (b * 9 + 7) / 8;
      b = next > b ? next : b + 1;
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

// Seven records and their metadata in one 128-byte pair of cache lines. The ids come first, so
// that the comparisons of a lookup read one line; the rest of a record is in the second.
struct alignas(128) Bucket {
  static constexpr uint8_t kAllUsed = (1u << kBucketSlots) - 1;
  static constexpr uint8_t kOverflowed = 0x80;  // in flags

  uint64_t id[kBucketSlots];
  uint32_t addr[kBucketSlots];  // IPv4 address (host order), or the IPv6 address's pool index
  uint32_t last_seen[kBucketSlots];
  uint16_t port[kBucketSlots];
  uint8_t used;   // bit j: slot j holds a record
  uint8_t flags;  // bit j < 7: slot j's address is IPv6; kOverflowed: an insert went past it

  // The slots holding `key`, as a bit mask.
  uint32_t match(uint64_t key) const {
    uint32_t m = 0;
    for (uint32_t j = 0; j < kBucketSlots; ++j) m |= uint32_t{id[j] == key} << j;
    return m & used;
  }
  bool v6(uint32_t j) const { return (flags >> j) & 1; }
};
static_assert(sizeof(Bucket) == 128);

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
    size_t overflowed = 0;  // buckets an insert went past, over all segments
    size_t buckets = 0;
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
  // Returns false when the id has no record.
  bool get(uint64_t id, Record& out) const;
  // Returns false when the id had no record.
  bool erase(uint64_t id);

  // Starts loading the lines a lookup of `id` reads first (its control group and the slots at the
  // start of its probe) without waiting for them. In a store of many megabytes each of those is a
  // cache and TLB miss; the shard prefetches a batch's records first to overlap them.
  void prefetch(uint64_t id) const {
    const uint64_t h = hash_of(id);
    const Segment& s = *directory_[h >> dir_shift_];
    const auto* b = reinterpret_cast<const uint8_t*>(s.buckets + home(h, s.bucket_count));
    store_detail::prefetch_line(b);
    store_detail::prefetch_line(b + 64);
  }

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
  // Checks every internal invariant (counts, metadata bits, each record in the segment of
  // its hash prefix and reachable by its probe, directory structure); returns "" or what is wrong.
  std::string check() const;

 private:
  using Bucket = store_detail::Bucket;
  static constexpr uint32_t kSlots = store_detail::kBucketSlots;

  struct Segment {
    Bucket* buckets = nullptr;
    uint32_t bucket_count = 0;
    uint32_t capacity = 0;  // slots: kSlots * bucket_count
    uint32_t size = 0;
    uint32_t overflowed = 0;      // buckets with kOverflowed set
    uint32_t overflow_limit = 0;  // rebuild in place once overflowed passes this
    uint64_t generation = 0;
    uint64_t prefix = 0;  // the top local_depth bits of its records' hashes
    uint8_t size_class = 0;
    uint8_t local_depth = 0;
    uint64_t first_hash() const { return local_depth == 0 ? 0 : prefix << (64 - local_depth); }
  };

  static uint64_t hash_of(uint64_t id) { return mix64(id, HashSeed::kStore); }
  static uint32_t home(uint64_t h, uint32_t bucket_count) {
    return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(h >> 6)} * bucket_count) >> 32);
  }
  static size_t block_bytes(size_t size_class) {
    return size_t{store_detail::kSizeClasses.capacity[size_class]} / kSlots * sizeof(Bucket);
  }

  Record record_at(const Bucket& b, uint32_t j) const;
  // Writes the record into slot j of b (empty, or holding the same id).
  void write_slot(Bucket& b, uint32_t j, uint64_t id, const Endpoint& e, uint32_t last_seen);

  Segment& segment_of(uint64_t h) const { return *directory_[h >> dir_shift_]; }
  // The slot (bucket * kSlots + j) holding `id`, or UINT32_MAX.
  static uint32_t find(const Segment& s, uint64_t id, uint64_t h);
  // The first free slot of h's probe, marking the full buckets it passes as overflowed.
  static uint32_t claim_free(Segment& s, uint64_t h);
  // Inserts a record known to be absent, making room first when its segment is full.
  void insert_new(uint64_t id, uint64_t h, const Endpoint& e, uint32_t last_seen);
  void erase_at(Segment& s, uint32_t slot);
  // After deletes: shrinks `s` when it is below 3/8 full.
  void maybe_shrink(Segment& s);
  // Makes room for one more record in `s` (grow or split), or rebuilds it when overflowed.
  void make_room(Segment& s);
  // Rebuilds `s` with capacity class `size_class` (smaller, equal or larger).
  void rehash(Segment& s, size_t size_class);
  bool can_split(const Segment& s) const;
  void split(Segment& s);
  void double_directory();
  // Allocates a segment's buckets, all empty.
  void init_segment(Segment& s, size_t size_class);
  void free_segment_block(Segment& s);
  // Moves slot j of `from`'s record into `to`, which must have room (no growth).
  static void move_slot(const Bucket& from, uint32_t j, Segment& to);
  void account_growth();

  // Scan helpers: the segment at the cursor (restarting it if it changed), and leaving it.
  Segment& scan_enter(ScanCursor& c);
  void scan_leave(ScanCursor& c, Segment& s);

  std::vector<Segment*> directory_;  // 2^global_depth_ entries
  uint32_t global_depth_ = 1;
  uint32_t dir_shift_ = 63;  // 64 - global_depth_
  size_t segment_count_ = 0;
  size_t size_ = 0;
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
    const uint32_t end =
        static_cast<uint32_t>(std::min<size_t>(s.capacity, c.slot + (max_slots - step.examined)));
    step.examined += end - c.slot;
    for (; c.slot < end; ++c.slot) {
      Bucket& b = s.buckets[c.slot / kSlots];
      const uint32_t j = c.slot % kSlots;
      if (((b.used >> j) & 1) == 0) continue;
      if (visit(b.id[j], record_at(b, j))) {
        erase_at(s, c.slot);  // moves nothing; a shrink waits until the scan leaves the segment
        ++step.erased;
      }
    }
    if (c.slot == s.capacity) scan_leave(c, s);
  }
  return step;
}

}  // namespace imhash
