#include "hash_server/record_store.h"

#include <bit>
#include <stdexcept>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace imhash {

using namespace store_detail;

namespace {

constexpr uint32_t kNone = UINT32_MAX;
// A store this large asks for huge pages on its new chunks (segment_arena.h).
constexpr size_t kHugePageThreshold = size_t{64} << 20;

// Sixteen control bytes, as bit masks (bit k: the byte at offset k).
#ifdef __SSE2__
struct Group {
  __m128i v;
  explicit Group(const uint8_t* p) : v(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))) {}
  // Full bytes whose fingerprint is `fp` (the family bit ignored: a lookup does not know it).
  uint32_t match(uint8_t fp) const {
    const __m128i masked = _mm_and_si128(v, _mm_set1_epi8(static_cast<char>(0xBF)));
    return static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(masked, _mm_set1_epi8(static_cast<char>(fp)))));
  }
  uint32_t empty() const {
    return static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(static_cast<char>(kEmpty)))));
  }
  // EMPTY or DELETED: the bytes with their top bit set.
  uint32_t free() const { return static_cast<uint32_t>(_mm_movemask_epi8(v)); }
};
#else
struct Group {
  uint8_t b[kGroup];
  explicit Group(const uint8_t* p) { std::memcpy(b, p, kGroup); }
  template <typename Pred>
  uint32_t mask(Pred pred) const {
    uint32_t m = 0;
    for (uint32_t k = 0; k < kGroup; ++k) m |= uint32_t{pred(b[k])} << k;
    return m;
  }
  uint32_t match(uint8_t fp) const {
    return mask([fp](uint8_t c) { return (c & 0xBF) == fp; });
  }
  uint32_t empty() const {
    return mask([](uint8_t c) { return c == kEmpty; });
  }
  uint32_t free() const {
    return mask([](uint8_t c) { return (c & 0x80) != 0; });
  }
};
#endif

// The smallest size class whose capacity holds `n` records at load num/den.
size_t class_for(size_t n, size_t num, size_t den) {
  for (size_t c = 0; c < kSizeClasses.count; ++c) {
    if (n * den <= size_t{kSizeClasses.capacity[c]} * num) return c;
  }
  throw std::length_error("record store segment too large");
}

// Split halves start as a segment that has just grown would be: at most 27/32 full, so that
// every segment keeps to the same band of load. A shrink leaves a segment at most 3/4 full.
constexpr size_t kSplitNum = 27, kSplitDen = 32;
constexpr size_t kShrinkNum = 3, kShrinkDen = 4;
// Below this many segments every insert is a "burst" into a few of them (make_room): a young
// store grows one class at a time.
constexpr size_t kBurstSegments = 8;

uint32_t max_used(uint32_t capacity) { return capacity - capacity / 8; }  // 7/8, rounded up

}  // namespace

size_t RecordStore::block_bytes(size_t size_class) {
  const uint32_t cap = kSizeClasses.capacity[size_class];
  return ctrl_bytes(cap) + (size_t{cap} * kSlotBytes + 63) / 64 * 64;
}

RecordStore::RecordStore() : arena_(std::make_unique<SegmentArena>()) {
  auto s = std::make_unique<Segment>();
  init_segment(*s, 0);
  s->table.segment = 0;
  directory_.assign(2, s->table);  // global depth 1 keeps the directory shift below 64
  capacity_ = s->table.capacity;
  segments_.push_back(std::move(s));
}

RecordStore::RecordStore(RecordStore&& o) noexcept
    : directory_(std::move(o.directory_)),
      segments_(std::move(o.segments_)),
      global_depth_(o.global_depth_),
      dir_shift_(o.dir_shift_),
      size_(o.size_),
      inserts_(o.inserts_),
      jumped_(std::move(o.jumped_)),
      capacity_(o.capacity_),
      next_generation_(o.next_generation_),
      arena_(std::move(o.arena_)),
      v6_(std::move(o.v6_)) {
  o.directory_.clear();
  o.segments_.clear();
  o.size_ = o.capacity_ = 0;
}

RecordStore::~RecordStore() {
  for (auto& s : segments_) free_segment_block(*s);
}

void RecordStore::init_segment(Segment& s, size_t size_class) {
  s.size_class = static_cast<uint8_t>(size_class);
  s.table.capacity = kSizeClasses.capacity[size_class];
  s.table.ctrl = arena_->allocate(block_bytes(size_class));
  std::memset(s.table.ctrl, kEmpty, s.table.capacity + kGroup - 1);
  s.size = 0;
  s.tombstones = 0;
  s.growth_left = max_used(s.table.capacity);
  s.generation = next_generation_++;
  s.built_at = inserts_;
}

void RecordStore::free_segment_block(Segment& s) {
  arena_->release(s.table.ctrl, block_bytes(s.size_class));
  s.table.ctrl = nullptr;
}

void RecordStore::account_growth() {
  if (!arena_->huge_pages() && memory_bytes() >= kHugePageThreshold) arena_->set_huge_pages(true);
}

RecordStore::Record RecordStore::record_at(const Table& t, uint32_t i) const {
  const uint8_t* p = slot(t, i);
  uint32_t addr, last_seen;
  uint16_t port;
  std::memcpy(&addr, p + 8, 4);
  std::memcpy(&last_seen, p + 12, 4);
  std::memcpy(&port, p + 16, 2);
  Record r;
  r.endpoint = (t.ctrl[i] & kFamily6) ? Endpoint::v6(v6_.at(addr), port) : Endpoint::v4(addr, port);
  r.last_seen = last_seen;
  return r;
}

void RecordStore::write_slot(const Table& t, uint32_t i, uint64_t id, uint64_t h, const Endpoint& e,
                             uint32_t last_seen) {
  // The address: IPv4 inline; IPv6 in the pool, reusing this slot's entry if it had one.
  uint8_t* p = slot(t, i);
  const uint8_t was = t.ctrl[i];
  const bool had_v6 = is_full(was) && (was & kFamily6);
  uint32_t addr = 0;
  if (had_v6) std::memcpy(&addr, p + 8, 4);
  if (e.family == 6) {
    if (had_v6) {
      v6_.replace(addr, e.addr);
    } else {
      addr = v6_.add(e.addr);
    }
  } else {
    if (had_v6) v6_.release(addr);
    addr = e.v4_host_order();
  }
  std::memcpy(p, &id, 8);
  std::memcpy(p + 8, &addr, 4);
  std::memcpy(p + 12, &last_seen, 4);
  std::memcpy(p + 16, &e.port, 2);
  // An update in the same family leaves the control byte as it is: its line stays clean, so an
  // UPSERT writes back only the slot's line.
  const auto c = static_cast<uint8_t>((e.family == 6 ? kFamily6 : 0) | fingerprint(h));
  if (c != was) set_ctrl(t, i, c);
}

uint32_t RecordStore::find(const Table& t, uint64_t id, uint64_t h) {
  const uint8_t fp = fingerprint(h);
  uint32_t pos = probe_start(h, t.capacity);
  const uint8_t* slots = t.slots();
  for (;;) {
    const Group g(t.ctrl + pos);
    for (uint32_t m = g.match(fp); m != 0; m &= m - 1) {
      uint32_t i = pos + static_cast<uint32_t>(std::countr_zero(m));
      if (i >= t.capacity) i -= t.capacity;
      if (slot_id(slots + size_t{i} * kSlotBytes) == id) return i;
    }
    // An EMPTY slot in the window ends the search: the id would have been stored before it. At
    // least 1/8 of a segment is EMPTY, so every probe ends.
    if (g.empty() != 0) return kNone;
    pos += kGroup;
    if (pos >= t.capacity) pos -= t.capacity;
  }
}

void RecordStore::prefetch_record(uint64_t id) const {
  const uint64_t h = hash_of(id);
  const Table& t = table_of(h);
  const uint32_t start = probe_start(h, t.capacity);
  for (uint32_t m = Group(t.ctrl + start).match(fingerprint(h)); m != 0; m &= m - 1) {
    uint32_t i = start + static_cast<uint32_t>(std::countr_zero(m));
    if (i >= t.capacity) i -= t.capacity;
    const uint8_t* s = slot(t, i);
    prefetch_line(s);
    prefetch_line(s + kSlotBytes - 1);
  }
}

uint32_t RecordStore::find_free(const Table& t, uint64_t h) {
  uint32_t pos = probe_start(h, t.capacity);
  for (;;) {
    if (const uint32_t m = Group(t.ctrl + pos).free(); m != 0) {
      uint32_t i = pos + static_cast<uint32_t>(std::countr_zero(m));
      if (i >= t.capacity) i -= t.capacity;
      return i;
    }
    pos += kGroup;
    if (pos >= t.capacity) pos -= t.capacity;
  }
}

bool RecordStore::upsert(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  const uint64_t h = hash_of(id);
  const Table& t = table_of(h);
  if (const uint32_t i = find(t, id, h); i != kNone) {
    write_slot(t, i, id, h, endpoint, last_seen);
    return false;
  }
  insert_new(id, h, endpoint, last_seen);
  return true;
}

bool RecordStore::insert_if_absent(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  const uint64_t h = hash_of(id);
  if (find(table_of(h), id, h) != kNone) return false;
  insert_new(id, h, endpoint, last_seen);
  return true;
}

RecordStore::Merge RecordStore::upsert_if_newer(uint64_t id, const Endpoint& endpoint,
                                                uint32_t last_seen, uint32_t keep_from) {
  const uint64_t h = hash_of(id);
  const Table& t = table_of(h);
  if (const uint32_t i = find(t, id, h); i != kNone) {
    if (record_at(t, i).last_seen >= keep_from) return Merge::kKeptNewer;
    write_slot(t, i, id, h, endpoint, last_seen);
    return Merge::kReplaced;
  }
  insert_new(id, h, endpoint, last_seen);
  return Merge::kInserted;
}

void RecordStore::insert_new(uint64_t id, uint64_t h, const Endpoint& e, uint32_t last_seen) {
  Segment* s = &segment_of(h);
  uint32_t i = find_free(s->table, h);
  if (s->table.ctrl[i] == kEmpty && s->growth_left == 0) {
    make_room(*s);  // may replace the segment (split)
    s = &segment_of(h);
    i = find_free(s->table, h);
  }
  if (s->table.ctrl[i] == kEmpty) {
    --s->growth_left;
  } else {
    --s->tombstones;
  }
  write_slot(s->table, i, id, h, e, last_seen);
  ++s->size;
  ++size_;
  ++inserts_;
}

bool RecordStore::get(uint64_t id, Record& out) const {
  const uint64_t h = hash_of(id);
  const Table& t = table_of(h);
  const uint32_t i = find(t, id, h);
  if (i == kNone) return false;
  out = record_at(t, i);
  return true;
}

RecordStore::Erase RecordStore::erase_unless_seen_from(uint64_t id, uint32_t keep_from) {
  const uint64_t h = hash_of(id);
  const Table& t = table_of(h);
  const uint32_t i = find(t, id, h);
  if (i == kNone) return Erase::kAbsent;
  if (record_at(t, i).last_seen >= keep_from) return Erase::kKeptNewer;
  Segment& s = *segments_[t.segment];
  erase_at(s, i);
  maybe_shrink(s);
  return Erase::kErased;
}

bool RecordStore::erase(uint64_t id) {
  const uint64_t h = hash_of(id);
  const Table& t = table_of(h);
  const uint32_t i = find(t, id, h);
  if (i == kNone) return false;
  Segment& s = *segments_[t.segment];
  erase_at(s, i);
  maybe_shrink(s);
  return true;
}

void RecordStore::erase_at(Segment& s, uint32_t i) {
  const Table& t = s.table;
  if (t.ctrl[i] & kFamily6) {
    uint32_t addr;
    std::memcpy(&addr, slot(t, i) + 8, 4);
    v6_.release(addr);
  }
  // EMPTY if every 16-slot window holding slot i has an EMPTY slot besides: then no probe ever
  // found the window full and went past i, and ending a lookup at i loses nothing.
  const uint32_t before = Group(t.ctrl + (i + t.capacity - kGroup) % t.capacity).empty();
  const uint32_t after = Group(t.ctrl + i).empty();
  const bool never_full =
      before != 0 && after != 0 &&
      std::countr_zero(after) + std::countl_zero(static_cast<uint16_t>(before)) <
          static_cast<int>(kGroup);
  if (never_full) {
    set_ctrl(t, i, kEmpty);
    ++s.growth_left;
  } else {
    set_ctrl(t, i, kDeleted);
    ++s.tombstones;
  }
  --s.size;
  --size_;
}

void RecordStore::maybe_shrink(Segment& s) {
  if (s.size_class == 0 || size_t{s.size} * 8 >= size_t{s.table.capacity} * 3) return;
  const size_t target = class_for(s.size, kShrinkNum, kShrinkDen);
  if (target < s.size_class) rehash(s, target);
}

void RecordStore::make_room(Segment& s) {
  if ((size_t{s.size} + 1) * 32 <= size_t{s.table.capacity} * 25) {
    rehash(s, s.size_class);  // mostly tombstones: clear them in place
  } else if (s.size_class < kSizeClasses.top) {
    // A burst (record_store.h, "Bursts"): filled again after fewer new records in the whole
    // store than half its own, so nearly all of them came here. Spread growth fills a segment
    // once per (segments / 8) x its size new records: never with kBurstSegments or more.
    const bool burst = segments_.size() >= kBurstSegments && inserts_ - s.built_at < s.size / 2;
    rehash(s, burst ? kSizeClasses.top : s.size_class + 1u);
    if (burst) note_jump(s);
  } else if (can_split(s)) {
    split(s);
  } else if (s.size_class + 1u < kSizeClasses.count) {
    rehash(s, s.size_class + 1u);
  } else {
    throw std::length_error("record store segment cannot grow further");
  }
}

void RecordStore::move_slot(const Table& from, uint32_t i, Segment& to) {
  const uint8_t* src = slot(from, i);
  const uint64_t h = hash_of(slot_id(src));
  const uint32_t j = find_free(to.table, h);
  std::memcpy(slot(to.table, j), src, kSlotBytes);
  set_ctrl(to.table, j, from.ctrl[i]);
  ++to.size;
  --to.growth_left;
}

void RecordStore::note_jump(const Segment& s) {
  // A burst sweeps hash space once, so a segment it jumped is either split by it or left
  // partly filled in the top class (as little as 27/32 x 7/8 / 2 full). The segments it left
  // are found here, at the next jumps: unchanged since the last look. A few sweeps at once (one
  // per source shard) leave a few entries; at most kMaxJumped are watched. One of them is
  // rebuilt per call, so an insert still rebuilds at most two segments (this one, and one left).
  constexpr size_t kMaxJumped = 16;
  size_t kept = 0;
  bool rebuilt = false;
  for (const Jumped& j : jumped_) {
    if (j.segment >= segments_.size()) continue;
    Segment& t = *segments_[j.segment];
    if (t.generation != j.generation) continue;  // rebuilt or split since: nothing to do
    const bool left = t.size == j.size && &t != &s;
    const size_t fit = class_for(t.size, kSplitNum, kSplitDen);
    if (left && fit >= t.size_class) continue;  // fits already
    if (left && !rebuilt) {
      rehash(t, fit);
      rebuilt = true;
      continue;
    }
    // Still filling, or left and waiting for the next call.
    jumped_[kept++] = Jumped{j.segment, t.size, t.generation};
  }
  jumped_.resize(kept);
  if (jumped_.size() >= kMaxJumped) jumped_.erase(jumped_.begin());
  jumped_.push_back(Jumped{s.table.segment, s.size, s.generation});
}

void RecordStore::rehash(Segment& s, size_t size_class) {
  Segment fresh;
  fresh.prefix = s.prefix;
  fresh.local_depth = s.local_depth;
  init_segment(fresh, size_class);
  fresh.table.segment = s.table.segment;
  for (uint32_t i = 0; i < s.table.capacity; ++i) {
    if (is_full(s.table.ctrl[i])) move_slot(s.table, i, fresh);
  }
  free_segment_block(s);
  capacity_ = capacity_ - s.table.capacity + fresh.table.capacity;
  s = fresh;
  publish(s);
  account_growth();
}

bool RecordStore::can_split(const Segment& s) const {
  if (s.local_depth < global_depth_) return true;
  // Doubling the directory is cheap, but ids crafted to share a long hash prefix could make it
  // double again and again for a handful of segments: keep it within 8 entries per segment (at
  // least 4096). A segment that may not split grows into the classes above the top one.
  if (global_depth_ >= 62) return false;
  return (size_t{2} << global_depth_) <= std::max<size_t>(4096, 8 * segments_.size());
}

void RecordStore::double_directory() {
  std::vector<Table> doubled(directory_.size() * 2);
  for (size_t i = 0; i < directory_.size(); ++i)
    doubled[2 * i] = doubled[2 * i + 1] = directory_[i];
  directory_.swap(doubled);
  ++global_depth_;
  --dir_shift_;
}

void RecordStore::publish(const Segment& s) {
  const size_t span = size_t{1} << (global_depth_ - s.local_depth);
  const size_t first = s.prefix << (global_depth_ - s.local_depth);
  std::fill_n(directory_.begin() + static_cast<std::ptrdiff_t>(first), span, s.table);
}

void RecordStore::split(Segment& s) {
  if (s.local_depth == global_depth_) double_directory();
  const uint32_t depth = s.local_depth;
  const uint64_t bit = uint64_t{1} << (63 - depth);
  const Table& old = s.table;
  uint32_t upper = 0;
  for (uint32_t i = 0; i < old.capacity; ++i) {
    if (is_full(old.ctrl[i]) && (hash_of(slot_id(slot(old, i))) & bit)) ++upper;
  }
  // The lower half keeps s's index in segments_, the upper half takes a new one.
  Segment half[2];
  for (uint64_t k = 0; k < 2; ++k) {
    half[k].prefix = s.prefix * 2 + k;
    half[k].local_depth = static_cast<uint8_t>(depth + 1);
    init_segment(half[k], class_for(k ? upper : s.size - upper, kSplitNum, kSplitDen));
  }
  half[0].table.segment = old.segment;
  half[1].table.segment = static_cast<uint32_t>(segments_.size());
  for (uint32_t i = 0; i < old.capacity; ++i) {
    if (!is_full(old.ctrl[i])) continue;
    move_slot(old, i, half[(hash_of(slot_id(slot(old, i))) & bit) ? 1 : 0]);
  }
  capacity_ = capacity_ - old.capacity + half[0].table.capacity + half[1].table.capacity;
  free_segment_block(s);
  s = half[0];
  segments_.push_back(std::make_unique<Segment>(half[1]));
  publish(s);
  publish(*segments_.back());
  account_growth();
}

size_t RecordStore::memory_bytes() const {
  return arena_->bytes_in_use() + segments_.size() * sizeof(Segment) +
         segments_.capacity() * sizeof(segments_[0]) + directory_.capacity() * sizeof(Table) +
         v6_.memory_bytes();
}

RecordStore::Segment& RecordStore::scan_enter(ScanCursor& c) {
  Segment& s = segment_of(c.position);
  if (s.first_hash() != c.position || s.generation != c.generation) {
    // Entered for the first time, or rehashed, grown, shrunk or split since the cursor was set:
    // slots moved, so (re)start it from its first slot. What was judged is judged again.
    c.position = s.first_hash();
    c.slot = 0;
    c.generation = s.generation;
  }
  return s;
}

void RecordStore::scan_leave(ScanCursor& c, Segment& s) {
  maybe_shrink(s);  // deferred from the scan's erases, so that they did not restart the segment
  const uint64_t next =
      s.local_depth == 0 ? 0 : s.first_hash() + (uint64_t{1} << (64 - s.local_depth));
  if (next == 0) {
    c.done = true;
    return;
  }
  c.position = next;
  c.slot = 0;
  c.generation = 0;
}

size_t RecordStore::slots_ahead(const ScanCursor& c) const {
  if (c.done) return 0;
  const Segment& s = segment_of(c.position);
  const bool same = s.first_hash() == c.position && s.generation == c.generation;
  const size_t here = same ? s.table.capacity - c.slot : s.table.capacity;
  const uint64_t next =
      s.local_depth == 0 ? 0 : s.first_hash() + (uint64_t{1} << (64 - s.local_depth));
  // The rest of hash space holds its share of the slots (hashing is uniform).
  const double after = next == 0 ? 0.0 : static_cast<double>(0 - next) / 18446744073709551616.0;
  return here + static_cast<size_t>(after * static_cast<double>(capacity_));
}

RecordStore::Shape RecordStore::shape() const {
  Shape sh;
  sh.global_depth = global_depth_;
  sh.segments_per_class.assign(kSizeClasses.count, 0);
  for (const auto& s : segments_) {
    ++sh.segments;
    sh.tombstones += s->tombstones;
    ++sh.segments_per_class[s->size_class];
  }
  return sh;
}

std::string RecordStore::check() const {
  auto fail = [](const std::string& what) { return what; };
  if (directory_.size() != (size_t{1} << global_depth_) || dir_shift_ != 64 - global_depth_) {
    return fail("directory size does not match its depth");
  }
  size_t segments = 0, records = 0, slots = 0, v6 = 0;
  for (size_t i = 0; i < directory_.size();) {
    if (directory_[i].segment >= segments_.size()) return fail("directory entry without segment");
    const Segment& s = *segments_[directory_[i].segment];
    const Table& t = s.table;
    if (t.segment != directory_[i].segment) return fail("segment not at its index");
    if (s.local_depth > global_depth_) return fail("local depth above global depth");
    const size_t span = size_t{1} << (global_depth_ - s.local_depth);
    if (i != (s.prefix << (global_depth_ - s.local_depth))) {
      return fail("segment at entry " + std::to_string(i) + " is not at its prefix's entries");
    }
    for (size_t e = i; e < i + span; ++e) {
      const Table& d = directory_[e];
      if (d.segment != t.segment) return fail("a segment's entries are not contiguous");
      if (d.ctrl != t.ctrl || d.capacity != t.capacity) {
        return fail("a directory entry's copy of its segment's arrays is stale");
      }
    }
    if (t.capacity != kSizeClasses.capacity[s.size_class])
      return fail("capacity is not its class's");
    for (uint32_t k = 0; k < kGroup - 1; ++k) {
      if (t.ctrl[t.capacity + k] != t.ctrl[k]) return fail("control byte clone differs");
    }
    uint32_t full = 0, deleted = 0, empty = 0;
    for (uint32_t k = 0; k < t.capacity; ++k) {
      const uint8_t c = t.ctrl[k];
      if (c == kEmpty) {
        ++empty;
        continue;
      }
      if (c == kDeleted) {
        ++deleted;
        continue;
      }
      if (!is_full(c)) return fail("control byte neither empty, deleted nor full");
      ++full;
      const uint8_t* p = slot(t, k);
      const uint64_t id = slot_id(p);
      const uint64_t h = hash_of(id);
      if (s.local_depth > 0 && (h >> (64 - s.local_depth)) != s.prefix) {
        return fail("record " + std::to_string(id) + " outside its segment's hash prefix");
      }
      if ((c & kFingerprintMask) != fingerprint(h)) return fail("fingerprint mismatch");
      if (find(t, id, h) != k) return fail("record " + std::to_string(id) + " not reachable");
      if (c & kFamily6) {
        uint32_t addr;
        std::memcpy(&addr, p + 8, 4);
        if (!v6_.issued(addr)) return fail("IPv6 address index out of the pool");
        ++v6;
      }
    }
    if (full != s.size || deleted != s.tombstones) return fail("segment counts are wrong");
    if (s.growth_left + s.size + s.tombstones != max_used(t.capacity)) {
      return fail("segment growth budget is wrong");
    }
    if (empty == 0) return fail("segment without an empty slot");
    ++segments;
    records += s.size;
    slots += t.capacity;
    i += span;
  }
  if (segments != segments_.size()) return fail("segment count is wrong");
  if (records != size_) return fail("record count is wrong");
  if (slots != capacity_) return fail("capacity is wrong");
  if (v6 != v6_.size()) return fail("IPv6 pool holds a different number of addresses");
  return "";
}

}  // namespace imhash
