// The endpoint a test record holds: one per id, IPv4 for odd ids and IPv6 for even ones, so that a
// test storing, streaming or answering records covers both families. (The endpoint a user logs in
// from in the integration tests is endpoint_of, tests/integration/answers.h.) Any thread.
#pragma once

#include <array>
#include <cstdint>

#include "common/codec/endpoint.h"

namespace imhash::test {

// Odd ids: 10.0.0.0/8 plus the id, port 1000 + id % 60000. Even ids: 2001:db8::/64 with the id in
// the last eight bytes (least significant first), port 2000 + id % 60000. Never port 0.
inline Endpoint record_endpoint(uint64_t id) {
  if (id % 2) {
    return Endpoint::v4(static_cast<uint32_t>(0x0a000000 + id % 0xffffff),
                        static_cast<uint16_t>(1000 + id % 60000));
  }
  std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};
  for (int i = 0; i < 8; ++i) a[8 + i] = static_cast<uint8_t>(id >> (8 * i));
  return Endpoint::v6(a, static_cast<uint16_t>(2000 + id % 60000));
}

}  // namespace imhash::test
