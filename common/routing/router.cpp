#include "common/routing/router.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "common/codec/hash.h"
#include "common/routing/shard_map.h"

namespace imhash {

namespace {

static_assert(kMaxServers < 0xffff, "ring slots hold server indexes as uint16_t");

constexpr uint16_t kEmptySlot = 0xffff;
// Seeds of the two Maglev permutation parameters. Pinned: changing them moves every id.
constexpr uint64_t kMaglevOffsetSeed = static_cast<uint64_t>(HashSeed::kRing);
constexpr uint64_t kMaglevSkipSeed = 0xe7037ed1a0b428dbULL;

// FNV-1a, 64 bits: a pinned, portable hash of a server's name bytes.
constexpr uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::shared_ptr<const Router> Router::compile(Table table) {
  if (std::string error = validate(table); !error.empty()) {
    throw std::invalid_argument("cannot compile an invalid routing table: " + error);
  }
  return std::shared_ptr<const Router>(new Router(std::move(table)));
}

Router::Router(Table table)
    : table_(std::move(table)),
      server_count_(static_cast<uint32_t>(table_.servers.size())),
      replicas_(table_.replicas) {
  switch (table_.mode) {
    case RoutingMode::kModulo:
      break;
    case RoutingMode::kRange:
      range_hi_.reserve(table_.ranges.size());
      range_owner_.reserve(table_.ranges.size());
      for (const IdRange& r : table_.ranges) {
        range_hi_.push_back(r.hi);
        range_owner_.push_back(static_cast<uint32_t>(table_.server_index(r.server)));
      }
      break;
    case RoutingMode::kRing:
      build_ring();
      break;
  }
}

// Maglev population (NSDI'16, Pseudocode 1). Server i's preference list is the permutation
// offset_i, offset_i + skip_i, ... (mod M), which visits every slot since M is prime. In each
// round every server, in name order, claims its next free preferred slot, w times for weight w,
// until all M slots are taken. Each server's cursor advances at most M times: O(M·N) worst case.
void Router::build_ring() {
  const uint32_t m = kRingSize;
  std::vector<uint32_t> order(server_count_);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
    return table_.servers[a].name < table_.servers[b].name;
  });
  std::vector<uint32_t> cursor(server_count_), skip(server_count_);
  for (uint32_t i = 0; i < server_count_; ++i) {
    const uint64_t h = fnv1a64(table_.servers[i].name);
    cursor[i] = static_cast<uint32_t>(fmix64(h ^ kMaglevOffsetSeed) % m);
    skip[i] = static_cast<uint32_t>(fmix64(h ^ kMaglevSkipSeed) % (m - 1)) + 1;
  }
  ring_.assign(m, kEmptySlot);
  uint32_t filled = 0;
  while (filled < m) {
    for (uint32_t i : order) {
      for (uint32_t turn = 0; turn < table_.servers[i].weight && filled < m; ++turn) {
        uint32_t slot = cursor[i];
        while (ring_[slot] != kEmptySlot) slot = (slot + skip[i]) % m;
        ring_[slot] = static_cast<uint16_t>(i);
        cursor[i] = (slot + skip[i]) % m;
        ++filled;
      }
    }
  }
}

uint32_t Router::owner(uint64_t id) const {
  switch (table_.mode) {
    case RoutingMode::kModulo:
      return static_cast<uint32_t>(
          (table_.modulo_hash == ModuloHash::kIdentity ? id : mix64(id, HashSeed::kRouting)) %
          server_count_);
    case RoutingMode::kRange: {
      // The last range ends at 2^64-1, so lower_bound always finds one.
      auto it = std::lower_bound(range_hi_.begin(), range_hi_.end(), id);
      return range_owner_[static_cast<size_t>(it - range_hi_.begin())];
    }
    case RoutingMode::kRing:
      return ring_[fast_range(mix64(id, HashSeed::kRing), kRingSize)];
  }
  return 0;
}

Route Router::route(uint64_t id) const {
  const uint32_t server = owner(id);
  return Route{server, shard_of(id, table_.servers[server].shards)};
}

ReplicaSet Router::replica_set(uint64_t id) const {
  ReplicaSet set;
  const auto add = [&](uint32_t server) {
    set.routes[set.size++] = Route{server, shard_of(id, table_.servers[server].shards)};
  };
  if (table_.mode != RoutingMode::kRing) {
    const uint32_t first = owner(id);
    for (uint32_t k = 0; k < replicas_; ++k) add((first + k) % server_count_);
    return set;
  }
  // validate() keeps replicas <= servers, and every server of the ring has slots (weight >= 1),
  // so the walk finds `replicas_` distinct servers within one turn of the ring.
  uint32_t slot = fast_range(mix64(id, HashSeed::kRing), kRingSize);
  add(ring_[slot]);
  while (set.size < replicas_) {
    slot = slot + 1 == kRingSize ? 0 : slot + 1;
    if (!set.contains(ring_[slot])) add(ring_[slot]);
  }
  return set;
}

bool Router::owns(uint64_t id, std::string_view server_name) const {
  return table_.servers[owner(id)].name == server_name;
}

}  // namespace imhash
