// Pinned values of the hash functions and the shard map: login and hash servers (and third-party
// implementations, see docs/protocol.md) must agree on them forever. Never update these numbers to
// make a change pass; a change here is a protocol change.
#include "common/routing/shard_map.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

using namespace imhash;

TEST_CASE("hash: fmix64 and the shard seed are pinned") {
  struct Golden {
    uint64_t id, fmix, shard_mix;
  };
  const Golden golden[] = {
      {0ULL, 0ULL, 17459417773143303033ULL},
      {1ULL, 12994781566227106604ULL, 1303445412361179593ULL},
      {2ULL, 4233148493373801447ULL, 2077114630659857628ULL},
      {42ULL, 9297814886316923340ULL, 17900822240429438623ULL},
      {1000ULL, 12610127409379334721ULL, 2564717422265803082ULL},
      {123456789ULL, 10339184063621167238ULL, 2262786441814050331ULL},
      {9223372036854775808ULL, 10338021812380738707ULL, 8757044755702041018ULL},
      {18446744073709551615ULL, 7256831767414464289ULL, 4472237632602278465ULL},
  };
  for (const auto& g : golden) {
    CHECK(fmix64(g.id) == g.fmix);
    CHECK(mix64(g.id, HashSeed::kShard) == g.shard_mix);
  }
  // The published MurmurHash3 finaliser value, so the constants cannot drift.
  CHECK(fmix64(1) == 0xb456bcfc34c2cb2cULL);
}

TEST_CASE("shard_map: shard_of is pinned for several shard counts") {
  const uint32_t counts[] = {1, 2, 3, 4, 8, 16, 1024};
  struct Golden {
    uint64_t id;
    uint32_t shard[7];
  };
  const Golden golden[] = {
      {0ULL, {0, 1, 2, 3, 7, 15, 969}},
      {1ULL, {0, 0, 0, 0, 0, 1, 72}},
      {2ULL, {0, 0, 0, 0, 0, 1, 115}},
      {42ULL, {0, 1, 2, 3, 7, 15, 993}},
      {1000ULL, {0, 0, 0, 0, 1, 2, 142}},
      {123456789ULL, {0, 0, 0, 0, 0, 1, 125}},
      {9223372036854775808ULL, {0, 0, 1, 1, 3, 7, 486}},
      {18446744073709551615ULL, {0, 0, 0, 0, 1, 3, 248}},
  };
  for (const auto& g : golden) {
    for (std::size_t i = 0; i < 7; ++i) CHECK(shard_of(g.id, counts[i]) == g.shard[i]);
  }
}

TEST_CASE("shard_map: consecutive ids spread evenly, and independently of the server choice") {
  constexpr uint32_t kShards = 8;
  std::vector<uint32_t> load(kShards);
  // Only ids that modulo mode sends to server 0 of 4: the shard map must still spread them.
  uint32_t n = 0;
  for (uint64_t id = 0; n < 400000; ++id) {
    if (mix64(id, HashSeed::kRouting) % 4 != 0) continue;
    ++load[shard_of(id, kShards)];
    ++n;
  }
  for (uint32_t l : load) {
    CHECK(l > 0.97 * n / kShards);
    CHECK(l < 1.03 * n / kShards);
  }
}
