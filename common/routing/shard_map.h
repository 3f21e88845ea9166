// The shard map: which shard of a hash server owns a user id. A fixed function of the id and the
// server's shard count, shared by login and hash servers and pinned by golden values
// (tests/unit/shard_map_test.cpp). Pure; any thread.
#pragma once

#include <cstdint>

#include "common/codec/hash.h"

namespace imhash {

constexpr uint32_t shard_of(uint64_t user_id, uint32_t shard_count) {
  return shard_count <= 1 ? 0 : fast_range(mix64(user_id, HashSeed::kShard), shard_count);
}

}  // namespace imhash
