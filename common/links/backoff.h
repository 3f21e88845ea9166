// Backoff: exponential reconnect delays with jitter, so that a server coming back (a hash server,
// the config server) is not hit by all its clients at the same instant. Not thread-safe; owned by
// one link.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace imhash {

class Backoff {
 public:
  using ms = std::chrono::milliseconds;
  Backoff(ms initial, ms max, uint64_t seed) : initial_(initial), max_(max), rng_(seed) {}

  // The next delay: min(max, initial * 2^failures), scaled by a random factor in [0.5, 1].
  ms next() {
    const int64_t ceiling =
        std::min<int64_t>(max_.count(), initial_.count() << std::min(failures_, 20));
    ++failures_;
    std::uniform_int_distribution<int64_t> pick(ceiling / 2, ceiling);
    return ms(pick(rng_));
  }
  void reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  ms initial_;
  ms max_;
  int failures_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace imhash
