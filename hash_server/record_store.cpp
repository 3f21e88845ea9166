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

uint32_t max_used(uint32_t capacity) { return capacity - capacity / 8; }  // 7/8, rounded up

}  // namespace

size_t RecordStore::ctrl_bytes(uint32_t capacity) { return (capacity + kGroup - 1 + 63) / 64 * 64; }

size_t RecordStore::block_bytes(size_t size_class) {
  const uint32_t cap = kSizeClasses.capacity[size_class];
  return ctrl_bytes(cap) + (size_t{cap} * kSlotBytes + 63) / 64 * 64;
}

RecordStore::RecordStore() : arena_(std::make_unique<SegmentArena>()) {
  auto* s = new Segment;
  init_segment(*s, 0);
  directory_.assign(2, s);  // global depth 1 keeps the directory shift below 64
  segment_count_ = 1;
  capacity_ = s->capacity;
}

RecordStore::RecordStore(RecordStore&& o) noexcept
    : directory_(std::move(o.directory_)),
      global_depth_(o.global_depth_),
      dir_shift_(o.dir_shift_),
      segment_count_(o.segment_count_),
      size_(o.size_),
      capacity_(o.capacity_),
      next_generation_(o.next_generation_),
      arena_(std::move(o.arena_)),
      v6_(std::move(o.v6_)) {
  o.directory_.clear();
  o.segment_count_ = o.size_ = o.capacity_ = 0;
}

RecordStore::~RecordStore() {
  for (size_t i = 0; i < directory_.size(); ++i) {
    Segment* s = directory_[i];
    if (i != (s->prefix << (global_depth_ - s->local_depth))) continue;  // not its first entry
    free_segment_block(*s);
    delete s;
  }
}

void RecordStore::init_segment(Segment& s, size_t size_class) {
  s.size_class = static_cast<uint8_t>(size_class);
  s.capacity = kSizeClasses.capacity[size_class];
  uint8_t* block = arena_->allocate(block_bytes(size_class));
  s.ctrl = block;
  s.slots = block + ctrl_bytes(s.capacity);
  std::memset(s.ctrl, kEmpty, s.capacity + kGroup - 1);
  s.size = 0;
  s.tombstones = 0;
  s.growth_left = max_used(s.capacity);
  s.generation = next_generation_++;
}

void RecordStore::free_segment_block(Segment& s) {
  arena_->release(s.ctrl, block_bytes(s.size_class));
  s.ctrl = s.slots = nullptr;
}

void RecordStore::account_growth() {
  if (!arena_->huge_pages() && memory_bytes() >= kHugePageThreshold) arena_->set_huge_pages(true);
}

RecordStore::Record RecordStore::record_at(const Segment& s, uint32_t i) const {
  const uint8_t* p = slot(s, i);
  uint32_t addr, last_seen;
  uint16_t port;
  std::memcpy(&addr, p + 8, 4);
  std::memcpy(&last_seen, p + 12, 4);
  std::memcpy(&port, p + 16, 2);
  Record r;
  r.endpoint = (s.ctrl[i] & kFamily6) ? Endpoint::v6(v6_.at(addr), port) : Endpoint::v4(addr, port);
  r.last_seen = last_seen;
  return r;
}

void RecordStore::write_slot(Segment& s, uint32_t i, uint64_t id, uint64_t h, const Endpoint& e,
                             uint32_t last_seen) {
  // The address: IPv4 inline; IPv6 in the pool, reusing this slot's entry if it had one.
  uint8_t* p = slot(s, i);
  const bool had_v6 = is_full(s.ctrl[i]) && (s.ctrl[i] & kFamily6);
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
  set_ctrl(s, i, static_cast<uint8_t>((e.family == 6 ? kFamily6 : 0) | fingerprint(h)));
}

uint32_t RecordStore::find(const Segment& s, uint64_t id, uint64_t h) const {
  const uint8_t fp = fingerprint(h);
  uint32_t pos = probe_start(h, s.capacity);
  for (;;) {
    const Group g(s.ctrl + pos);
    for (uint32_t m = g.match(fp); m != 0; m &= m - 1) {
      uint32_t i = pos + static_cast<uint32_t>(std::countr_zero(m));
      if (i >= s.capacity) i -= s.capacity;
      if (slot_id(slot(s, i)) == id) return i;
    }
    // An EMPTY slot in the window ends the search: the id would have been stored before it. At
    // least 1/8 of a segment is EMPTY, so every probe ends.
    if (g.empty() != 0) return kNone;
    pos += kGroup;
    if (pos >= s.capacity) pos -= s.capacity;
  }
}

uint32_t RecordStore::find_free(const Segment& s, uint64_t h) {
  uint32_t pos = probe_start(h, s.capacity);
  for (;;) {
    if (const uint32_t m = Group(s.ctrl + pos).free(); m != 0) {
      uint32_t i = pos + static_cast<uint32_t>(std::countr_zero(m));
      if (i >= s.capacity) i -= s.capacity;
      return i;
    }
    pos += kGroup;
    if (pos >= s.capacity) pos -= s.capacity;
  }
}

bool RecordStore::upsert(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  const uint64_t h = hash_of(id);
  Segment& s = segment_of(h);
  if (const uint32_t i = find(s, id, h); i != kNone) {
    write_slot(s, i, id, h, endpoint, last_seen);
    return false;
  }
  insert_new(id, h, endpoint, last_seen);
  return true;
}

bool RecordStore::insert_if_absent(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  const uint64_t h = hash_of(id);
  if (find(segment_of(h), id, h) != kNone) return false;
  insert_new(id, h, endpoint, last_seen);
  return true;
}

void RecordStore::insert_new(uint64_t id, uint64_t h, const Endpoint& e, uint32_t last_seen) {
  Segment* s = &segment_of(h);
  uint32_t i = find_free(*s, h);
  if (s->ctrl[i] == kEmpty && s->growth_left == 0) {
    make_room(*s);  // may replace the segment (split)
    s = &segment_of(h);
    i = find_free(*s, h);
  }
  if (s->ctrl[i] == kEmpty) {
    --s->growth_left;
  } else {
    --s->tombstones;
  }
  write_slot(*s, i, id, h, e, last_seen);
  ++s->size;
  ++size_;
}

bool RecordStore::get(uint64_t id, Record& out) const {
  const uint64_t h = hash_of(id);
  const Segment& s = segment_of(h);
  const uint32_t i = find(s, id, h);
  if (i == kNone) return false;
  out = record_at(s, i);
  return true;
}

bool RecordStore::erase(uint64_t id) {
  const uint64_t h = hash_of(id);
  Segment& s = segment_of(h);
  const uint32_t i = find(s, id, h);
  if (i == kNone) return false;
  erase_at(s, i);
  maybe_shrink(s);
  return true;
}

void RecordStore::erase_at(Segment& s, uint32_t i) {
  if (s.ctrl[i] & kFamily6) {
    uint32_t addr;
    std::memcpy(&addr, slot(s, i) + 8, 4);
    v6_.release(addr);
  }
  // EMPTY if every 16-slot window holding slot i has an EMPTY slot besides: then no probe ever
  // found the window full and went past i, and ending a lookup at i loses nothing.
  const uint32_t before = Group(s.ctrl + (i + s.capacity - kGroup) % s.capacity).empty();
  const uint32_t after = Group(s.ctrl + i).empty();
  const bool never_full =
      before != 0 && after != 0 &&
      std::countr_zero(after) + std::countl_zero(static_cast<uint16_t>(before)) <
          static_cast<int>(kGroup);
  if (never_full) {
    set_ctrl(s, i, kEmpty);
    ++s.growth_left;
  } else {
    set_ctrl(s, i, kDeleted);
    ++s.tombstones;
  }
  --s.size;
  --size_;
}

void RecordStore::maybe_shrink(Segment& s) {
  if (s.size_class == 0 || size_t{s.size} * 8 >= size_t{s.capacity} * 3) return;
  const size_t target = class_for(s.size, kShrinkNum, kShrinkDen);
  if (target < s.size_class) rehash(s, target);
}

void RecordStore::make_room(Segment& s) {
  if ((size_t{s.size} + 1) * 32 <= size_t{s.capacity} * 25) {
    rehash(s, s.size_class);  // mostly tombstones: clear them in place
  } else if (s.size_class < kSizeClasses.top) {
    rehash(s, s.size_class + 1u);
  } else if (can_split(s)) {
    split(s);
  } else if (s.size_class + 1u < kSizeClasses.count) {
    rehash(s, s.size_class + 1u);
  } else {
    throw std::length_error("record store segment cannot grow further");
  }
}

void RecordStore::move_slot(const Segment& from, uint32_t i, Segment& to) {
  const uint8_t* src = slot(from, i);
  const uint64_t h = hash_of(slot_id(src));
  const uint32_t j = find_free(to, h);
  std::memcpy(slot(to, j), src, kSlotBytes);
  set_ctrl(to, j, from.ctrl[i]);
  ++to.size;
  --to.growth_left;
}

void RecordStore::rehash(Segment& s, size_t size_class) {
  Segment fresh;
  fresh.prefix = s.prefix;
  fresh.local_depth = s.local_depth;
  init_segment(fresh, size_class);
  for (uint32_t i = 0; i < s.capacity; ++i) {
    if (is_full(s.ctrl[i])) move_slot(s, i, fresh);
  }
  free_segment_block(s);
  capacity_ = capacity_ - s.capacity + fresh.capacity;
  s = fresh;
  account_growth();
}

bool RecordStore::can_split(const Segment& s) const {
  if (s.local_depth < global_depth_) return true;
  // Doubling the directory is cheap, but ids crafted to share a long hash prefix could make it
  // double again and again for a handful of segments: keep it within 8 entries per segment (at
  // least 4096). A segment that may not split grows into the classes above the top one.
  if (global_depth_ >= 62) return false;
  return (size_t{2} << global_depth_) <= std::max<size_t>(4096, 8 * segment_count_);
}

void RecordStore::double_directory() {
  std::vector<Segment*> doubled(directory_.size() * 2);
  for (size_t i = 0; i < directory_.size(); ++i)
    doubled[2 * i] = doubled[2 * i + 1] = directory_[i];
  directory_.swap(doubled);
  ++global_depth_;
  --dir_shift_;
}

void RecordStore::split(Segment& s) {
  if (s.local_depth == global_depth_) double_directory();
  const uint32_t depth = s.local_depth;
  const uint64_t bit = uint64_t{1} << (63 - depth);
  uint32_t upper = 0;
  for (uint32_t i = 0; i < s.capacity; ++i) {
    if (is_full(s.ctrl[i]) && (hash_of(slot_id(slot(s, i))) & bit)) ++upper;
  }
  Segment* half[2] = {new Segment, new Segment};
  for (uint64_t k = 0; k < 2; ++k) {
    half[k]->prefix = s.prefix * 2 + k;
    half[k]->local_depth = static_cast<uint8_t>(depth + 1);
    init_segment(*half[k], class_for(k ? upper : s.size - upper, kSplitNum, kSplitDen));
  }
  for (uint32_t i = 0; i < s.capacity; ++i) {
    if (!is_full(s.ctrl[i])) continue;
    move_slot(s, i, *half[(hash_of(slot_id(slot(s, i))) & bit) ? 1 : 0]);
  }
  // s's directory entries: the first half now points to the lower segment, the rest to the upper.
  const size_t span = size_t{1} << (global_depth_ - depth);
  const size_t first = s.prefix << (global_depth_ - depth);
  for (size_t e = 0; e < span; ++e) directory_[first + e] = half[e < span / 2 ? 0 : 1];
  capacity_ = capacity_ - s.capacity + half[0]->capacity + half[1]->capacity;
  ++segment_count_;
  free_segment_block(s);
  delete &s;
  account_growth();
}

size_t RecordStore::memory_bytes() const {
  return arena_->bytes_in_use() + segment_count_ * sizeof(Segment) +
         directory_.capacity() * sizeof(Segment*) + v6_.memory_bytes();
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
  const size_t here = same ? s.capacity - c.slot : s.capacity;
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
  for (size_t i = 0; i < directory_.size(); ++i) {
    const Segment* s = directory_[i];
    if (i != (s->prefix << (global_depth_ - s->local_depth))) continue;
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
    const Segment& s = *directory_[i];
    if (s.local_depth > global_depth_) return fail("local depth above global depth");
    const size_t span = size_t{1} << (global_depth_ - s.local_depth);
    if (i != (s.prefix << (global_depth_ - s.local_depth))) {
      return fail("segment at entry " + std::to_string(i) + " is not at its prefix's entries");
    }
    for (size_t e = i; e < i + span; ++e) {
      if (directory_[e] != &s) return fail("a segment's entries are not contiguous");
    }
    if (s.capacity != kSizeClasses.capacity[s.size_class])
      return fail("capacity is not its class's");
    for (uint32_t k = 0; k < kGroup - 1; ++k) {
      if (s.ctrl[s.capacity + k] != s.ctrl[k]) return fail("control byte clone differs");
    }
    uint32_t full = 0, deleted = 0, empty = 0;
    for (uint32_t k = 0; k < s.capacity; ++k) {
      const uint8_t c = s.ctrl[k];
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
      const uint8_t* p = slot(s, k);
      const uint64_t id = slot_id(p);
      const uint64_t h = hash_of(id);
      if (s.local_depth > 0 && (h >> (64 - s.local_depth)) != s.prefix) {
        return fail("record " + std::to_string(id) + " outside its segment's hash prefix");
      }
      if ((c & kFingerprintMask) != fingerprint(h)) return fail("fingerprint mismatch");
      if (find(s, id, h) != k) return fail("record " + std::to_string(id) + " not reachable");
      if (c & kFamily6) {
        uint32_t addr;
        std::memcpy(&addr, p + 8, 4);
        if (!v6_.issued(addr)) return fail("IPv6 address index out of the pool");
        ++v6;
      }
    }
    if (full != s.size || deleted != s.tombstones) return fail("segment counts are wrong");
    if (s.growth_left + s.size + s.tombstones != max_used(s.capacity)) {
      return fail("segment growth budget is wrong");
    }
    if (empty == 0) return fail("segment without an empty slot");
    ++segments;
    records += s.size;
    slots += s.capacity;
    i += span;
  }
  if (segments != segment_count_) return fail("segment count is wrong");
  if (records != size_) return fail("record count is wrong");
  if (slots != capacity_) return fail("capacity is wrong");
  if (v6 != v6_.size()) return fail("IPv6 pool holds a different number of addresses");
  return "";
}

}  // namespace imhash
