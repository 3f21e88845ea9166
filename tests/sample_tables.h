// Tables for tests of the config server's state: a ring of named servers on loopback ports from
// 7001, four shards each; and the id space's bounds the routing tests cut at. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/routing/table.h"

namespace imhash::test {

// The top of the id space, and its middle: where range and ring tables are cut in the tests.
inline constexpr uint64_t kMax = UINT64_MAX;
inline constexpr uint64_t kHalf = uint64_t{1} << 63;

inline Table ring_of(uint64_t version, const std::vector<std::string>& names) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRing;
  uint16_t port = 7001;
  for (const std::string& n : names) {
    t.servers.push_back({n, "127.0.0.1:" + std::to_string(port++), 4, 1});
  }
  return t;
}

}  // namespace imhash::test
