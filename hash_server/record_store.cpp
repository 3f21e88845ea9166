#include "hash_server/record_store.h"

#include <algorithm>
#include <bit>

#include "common/hash.h"

namespace imhash {

RecordStore::RecordStore(size_t initial_capacity) {
  const size_t cap = std::bit_ceil(std::max<size_t>(initial_capacity, 16));
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
}

size_t RecordStore::home(uint64_t id) const { return mix64(id, HashSeed::kStore) & mask_; }

size_t RecordStore::find(uint64_t id) const {
  size_t i = home(id);
  while (slots_[i].family != 0 && slots_[i].id != id) i = (i + 1) & mask_;
  return i;
}

void RecordStore::fill(Slot& s, uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  s.id = id;
  s.port = endpoint.port;
  s.last_seen = last_seen;
  s.family = endpoint.family;
  if (endpoint.family == 4) {
    s.addr = endpoint.v4_host_order();
    return;
  }
  if (!v6_free_.empty()) {
    s.addr = v6_free_.back();
    v6_free_.pop_back();
    v6_pool_[s.addr] = endpoint.addr;
  } else {
    s.addr = static_cast<uint32_t>(v6_pool_.size());
    v6_pool_.push_back(endpoint.addr);
  }
}

Endpoint RecordStore::endpoint_of(const Slot& s) const {
  return s.family == 6 ? Endpoint::v6(v6_pool_[s.addr], s.port) : Endpoint::v4(s.addr, s.port);
}

void RecordStore::release_address(const Slot& s) {
  if (s.family == 6) v6_free_.push_back(s.addr);
}

bool RecordStore::upsert(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  size_t i = find(id);
  if (slots_[i].family != 0) {
    release_address(slots_[i]);
    fill(slots_[i], id, endpoint, last_seen);
    return false;
  }
  if ((size_ + 1) * 4 > slots_.size() * 3) {
    grow();
    i = find(id);
  }
  fill(slots_[i], id, endpoint, last_seen);
  ++size_;
  return true;
}

bool RecordStore::insert_if_absent(uint64_t id, const Endpoint& endpoint, uint32_t last_seen) {
  if (slots_[find(id)].family != 0) return false;
  return upsert(id, endpoint, last_seen);
}

bool RecordStore::get(uint64_t id, Record& out) const {
  const Slot& s = slots_[find(id)];
  if (s.family == 0) return false;
  out.endpoint = endpoint_of(s);
  out.last_seen = s.last_seen;
  return true;
}

bool RecordStore::erase(uint64_t id) {
  const size_t i = find(id);
  if (slots_[i].family == 0) return false;
  erase_at(i);
  return true;
}

void RecordStore::erase_at(size_t hole) {
  release_address(slots_[hole]);
  --size_;
  // Backward shift: pull each following record of the probe run into the hole unless that would
  // move it before its home slot.
  size_t j = hole;
  for (;;) {
    j = (j + 1) & mask_;
    if (slots_[j].family == 0) break;
    const size_t k = home(slots_[j].id);
    // The record at j may move to `hole` only if its home is not cyclically inside (hole, j].
    const bool home_in_between = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
    if (!home_in_between) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = Slot{};
}

void RecordStore::grow() {
  decltype(slots_) old(slots_.size() * 2, Slot{});
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  ++generation_;
  for (const Slot& s : old) {
    if (s.family == 0) continue;
    size_t i = home(s.id);
    while (slots_[i].family != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

size_t RecordStore::memory_bytes() const {
  return slots_.capacity() * sizeof(Slot) + v6_pool_.capacity() * sizeof(v6_pool_[0]) +
         v6_free_.capacity() * sizeof(uint32_t);
}

}  // namespace imhash
