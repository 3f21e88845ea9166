// 64-bit mixing functions used by the shard map, the routing modes and the record store.
// Pure functions; any thread. Their outputs are pinned by golden-value tests
// (tests/unit/shard_map_test.cpp) because login and hash servers must agree on them: never change
// one without a protocol version bump.
#pragma once

#include <cstdint>

namespace imhash {

// The finaliser of MurmurHash3 (fmix64): a bijection on 64-bit values with full avalanche.
constexpr uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Independent hash families for independent decisions: if the server choice and the shard choice
// used the same hash, every id of server k (hash ≡ k mod N) would pile onto a few shards.
enum class HashSeed : uint64_t {
  kRouting = 0x9e3779b97f4a7c15ULL,  // modulo mode's default mixing hash
  kShard = 0xd1b54a32d192ed03ULL,    // shard map
  kStore = 0x8cb92ba72f3d8dd7ULL,    // slot choice inside a shard's hash table
  kRing = 0xa0761d6478bd642fULL,     // consistent-hash ring
};

constexpr uint64_t mix64(uint64_t id, HashSeed seed) {
  return fmix64(id ^ static_cast<uint64_t>(seed));
}

__extension__ using uint128 = unsigned __int128;

// Maps a uniform 64-bit value onto [0, n) without division (Lemire's multiply-shift).
constexpr uint32_t fast_range(uint64_t h, uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint128>(h) * n) >> 64);
}

}  // namespace imhash
