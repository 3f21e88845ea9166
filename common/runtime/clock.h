// Clocks. The monotonic clock in nanoseconds (std::chrono::steady_clock, CLOCK_MONOTONIC on Linux),
// as the servers' timers, heartbeats and grace periods and udp_sim's pacing read it. Any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace imhash {

inline int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The wall clock (CLOCK_REALTIME) in microseconds since the Unix epoch: for timestamps another
// process reads (a heartbeat's "sent_us"), never for timers.
inline uint64_t unix_micros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The same in milliseconds: for times shown to operators (a purge's start, a history entry).
inline uint64_t unix_millis() { return unix_micros() / 1000; }

// The wall clock minus the monotonic one, in nanoseconds: turns a monotonic time into Unix time
// (when a write was made, which other processes compare).
inline int64_t unix_minus_monotonic_ns() {
  return static_cast<int64_t>(unix_micros()) * 1000 - monotonic_ns();
}

}  // namespace imhash
