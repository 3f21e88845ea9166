// The monotonic clock in nanoseconds (std::chrono::steady_clock, CLOCK_MONOTONIC on Linux), as
// the servers' timers, heartbeats and grace periods and udp_sim's pacing read it. Any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace imhash {

inline int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace imhash
