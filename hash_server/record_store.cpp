#include "hash_server/record_store.h"

#include <bit>
#include <stdexcept>

namespace imhash {

using namespace store_detail;

namespace {

constexpr uint32_t kNone = UINT32_MAX;
// A store this large asks for huge pages on its new chunks (segment_arena.h).
constexpr size_t kHugePageThreshold = size_t{64} << 20;

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

// A rebuilt segment may gather another 1/8 of its buckets' worth of overflowed marks (from
// inserts after deletes) before it is rebuilt again: the rebuild costs one pass over the segment
// per bucket_count / 8 marked buckets, and lookups stay within a bucket or two.
uint32_t overflow_limit_after_build(uint32_t overflowed, uint32_t bucket_count) {
  return overflowed + bucket_count / 8 + 1;
}

}  // namespace

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
  s.bucket_count = s.capacity / kSlots;
  const size_t bytes = block_bytes(size_class);
  s.buckets = reinterpret_cast<Bucket*>(arena_->allocate(bytes));
  for (uint32_t i = 0; i < s.bucket_count; ++i) {
    s.buckets[i].used = 0;
    s.buckets[i].flags = 0;
  }
  s.size = 0;
  s.overflowed = 0;
  s.overflow_limit = 0;
  s.generation = next_generation_++;
}

void RecordStore::free_segment_block(Segment& s) {
  arena_->release(reinterpret_cast<uint8_t*>(s.buckets), block_bytes(s.size_class));
  s.buckets = nullptr;
}

void RecordStore::account_growth() {
  if (!arena_->huge_pages() && memory_bytes() >= kHugePageThreshold) arena_->set_huge_pages(true);
}

RecordStore::Record RecordStore::record_at(const Bucket& b, uint32_t j) const {
  Record r;
  r.endpoint =
      b.v6(j) ? Endpoint::v6(v6_.at(b.addr[j]), b.port[j]) : Endpoint::v4(b.addr[j], b.port[j]);
  r.last_seen = b.last_seen[j];
  return r;
}

void RecordStore::write_slot(Bucket& b, uint32_t j, uint64_t id, const Endpoint& e,
                             uint32_t last_seen) {
  // The address: IPv4 inline; IPv6 in the pool, reusing this slot's entry if it had one.
  const uint8_t bit = static_cast<uint8_t>(1u << j);
  const bool had_v6 = (b.used & bit) && (b.flags & bit);
  if (e.family == 6) {
    if (had_v6) {
      v6_.replace(b.addr[j], e.addr);
    } else {
      b.addr[j] = v6_.add(e.addr);
    }
    b.flags |= bit;
  } else {
    if (had_v6) v6_.release(b.addr[j]);
    b.addr[j] = e.v4_host_order();
    b.flags &= static_cast<uint8_t>(~bit);
  }
  b.id[j] = id;
  b.last_seen[j] = last_seen;
  b.port[j] = e.port;
  b.used |= bit;
}

uint32_t RecordStore::find(const Segment& s, uint64_t id, uint64_t h) {
  uint32_t i = home(h, s.bucket_count);
  // At most every bucket once: after churn every bucket of a segment may be marked overflowed.
  for (uint32_t n = 0; n < s.bucket_count; ++n) {
    const Bucket& b = s.buckets[i];
    if (const uint32_t m = b.match(id); m != 0) {
      return i * kSlots + static_cast<uint32_t>(std::countr_zero(m));
    }
    // Every insert that found this bucket full marked it before going on, so an id is either
    // here or, only if it is marked, further on.
    if ((b.flags & Bucket::kOverflowed) == 0) return kNone;
    if (++i == s.bucket_count) i = 0;
  }
  return kNone;
}

uint32_t RecordStore::claim_free(Segment& s, uint64_t h) {
  uint32_t i = home(h, s.bucket_count);
  for (;;) {
    Bucket& b = s.buckets[i];
    if (b.used != Bucket::kAllUsed) {
      return i * kSlots + static_cast<uint32_t>(std::countr_one(b.used));
    }
    if ((b.flags & Bucket::kOverflowed) == 0) {
      b.flags |= Bucket::kOverflowed;
      ++s.overflowed;
    }
    if (++i == s.bucket_count) i = 0;
  }
}

bool RecordStore::upsert(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  const uint64_t h = hash_of(id);
  Segment& s = segment_of(h);
  if (const uint32_t i = find(s, id, h); i != kNone) {
    write_slot(s.buckets[i / kSlots], i % kSlots, id, endpoint, last_seen);
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
  if (s->size >= max_used(s->capacity) || s->overflowed > s->overflow_limit) {
    make_room(*s);  // may replace the segment (split)
    s = &segment_of(h);
  }
  const uint32_t i = claim_free(*s, h);
  write_slot(s->buckets[i / kSlots], i % kSlots, id, e, last_seen);
  ++s->size;
  ++size_;
}

bool RecordStore::get(uint64_t id, Record& out) const {
  const uint64_t h = hash_of(id);
  const Segment& s = segment_of(h);
  const uint32_t i = find(s, id, h);
  if (i == kNone) return false;
  out = record_at(s.buckets[i / kSlots], i % kSlots);
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

void RecordStore::erase_at(Segment& s, uint32_t slot) {
  Bucket& b = s.buckets[slot / kSlots];
  const uint32_t j = slot % kSlots;
  const uint8_t bit = static_cast<uint8_t>(1u << j);
  if (b.flags & bit) v6_.release(b.addr[j]);
  b.flags &= static_cast<uint8_t>(~bit);
  b.used &= static_cast<uint8_t>(~bit);
  --s.size;
  --size_;
}

void RecordStore::maybe_shrink(Segment& s) {
  if (s.size_class == 0 || size_t{s.size} * 8 >= size_t{s.capacity} * 3) return;
  const size_t target = class_for(s.size, kShrinkNum, kShrinkDen);
  if (target < s.size_class) rehash(s, target);
}

void RecordStore::make_room(Segment& s) {
  if (s.size < max_used(s.capacity)) {
    rehash(s, s.size_class);  // room enough, but the overflowed marks have piled up: clear them
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

void RecordStore::move_slot(const Bucket& from, uint32_t j, Segment& to) {
  const uint32_t i = claim_free(to, hash_of(from.id[j]));
  Bucket& b = to.buckets[i / kSlots];
  const uint32_t k = i % kSlots;
  const uint8_t bit = static_cast<uint8_t>(1u << k);
  b.id[k] = from.id[j];
  b.addr[k] = from.addr[j];
  b.last_seen[k] = from.last_seen[j];
  b.port[k] = from.port[j];
  b.used |= bit;
  if (from.v6(j)) b.flags |= bit;
  ++to.size;
}

void RecordStore::rehash(Segment& s, size_t size_class) {
  Segment fresh;
  fresh.prefix = s.prefix;
  fresh.local_depth = s.local_depth;
  init_segment(fresh, size_class);
  for (uint32_t i = 0; i < s.bucket_count; ++i) {
    const Bucket& b = s.buckets[i];
    for (uint32_t m = b.used; m != 0; m &= m - 1) {
      move_slot(b, static_cast<uint32_t>(std::countr_zero(m)), fresh);
    }
  }
  fresh.overflow_limit = overflow_limit_after_build(fresh.overflowed, fresh.bucket_count);
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
  for (uint32_t i = 0; i < s.bucket_count; ++i) {
    const Bucket& b = s.buckets[i];
    for (uint32_t m = b.used; m != 0; m &= m - 1) {
      upper += (hash_of(b.id[std::countr_zero(m)]) & bit) != 0;
    }
  }
  Segment* half[2] = {new Segment, new Segment};
  for (uint64_t k = 0; k < 2; ++k) {
    half[k]->prefix = s.prefix * 2 + k;
    half[k]->local_depth = static_cast<uint8_t>(depth + 1);
    init_segment(*half[k], class_for(k ? upper : s.size - upper, kSplitNum, kSplitDen));
  }
  for (uint32_t i = 0; i < s.bucket_count; ++i) {
    const Bucket& b = s.buckets[i];
    for (uint32_t m = b.used; m != 0; m &= m - 1) {
      const auto j = static_cast<uint32_t>(std::countr_zero(m));
      move_slot(b, j, *half[(hash_of(b.id[j]) & bit) ? 1 : 0]);
    }
  }
  for (Segment* h : half)
    h->overflow_limit = overflow_limit_after_build(h->overflowed, h->bucket_count);
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
    sh.overflowed += s->overflowed;
    sh.buckets += s->bucket_count;
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
    if (s.capacity != kSizeClasses.capacity[s.size_class] || s.capacity != s.bucket_count * kSlots)
      return fail("capacity is not its class's");
    if (reinterpret_cast<uintptr_t>(s.buckets) % sizeof(Bucket) != 0)
      return fail("buckets not aligned to 128 bytes");
    uint32_t full = 0, overflowed = 0, free_slots = 0;
    for (uint32_t k = 0; k < s.bucket_count; ++k) {
      const Bucket& b = s.buckets[k];
      if (b.used & ~Bucket::kAllUsed) return fail("a slot beyond the seventh is marked used");
      if (b.flags & ~b.used & Bucket::kAllUsed) return fail("an empty slot is marked IPv6");
      overflowed += (b.flags & Bucket::kOverflowed) != 0;
      free_slots += kSlots - static_cast<uint32_t>(std::popcount(b.used));
      for (uint32_t m = b.used; m != 0; m &= m - 1) {
        const auto j = static_cast<uint32_t>(std::countr_zero(m));
        ++full;
        const uint64_t id = b.id[j];
        const uint64_t h = hash_of(id);
        if (s.local_depth > 0 && (h >> (64 - s.local_depth)) != s.prefix) {
          return fail("record " + std::to_string(id) + " outside its segment's hash prefix");
        }
        if (find(s, id, h) != k * kSlots + j) {
          return fail("record " + std::to_string(id) + " not reachable (or stored twice)");
        }
        if (b.v6(j)) {
          if (!v6_.issued(b.addr[j])) return fail("IPv6 address index out of the pool");
          ++v6;
        }
      }
    }
    if (full != s.size || overflowed != s.overflowed) return fail("segment counts are wrong");
    if (s.size > max_used(s.capacity)) return fail("segment fuller than 7/8");
    if (free_slots == 0) return fail("segment without a free slot");
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
