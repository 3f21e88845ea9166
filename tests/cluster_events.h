// What the tests of the config server's core (config_server/node_registry.h, takeover_hold.h,
// move_rules.h) feed it: times in steady-clock nanoseconds, and a node's registration.
#pragma once

#include <cstdint>
#include <string>

#include "common/control_protocol.h"

namespace imhash::test {

inline constexpr int64_t kSecondNs = 1'000'000'000;
// The DOWN window of the tests: three heartbeats of a second.
inline constexpr int64_t kDownAfterNs = 3 * kSecondNs;

// A node's register message: `role` `name` at 127.0.0.1:7000, 2 shards, running `version`.
inline control::Register registration(control::Role role, const std::string& name,
                                      uint64_t version) {
  control::Register r;
  r.role = role;
  r.name = name;
  r.address = "127.0.0.1:7000";
  r.shards = 2;
  r.pid = 42;
  r.version = version;
  return r;
}

}  // namespace imhash::test
