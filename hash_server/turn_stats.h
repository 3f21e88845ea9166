// TurnStats: how long a shard's event loop turns take (one read buffer's batch of requests, one
// purge step, each with any store growth inside it): the longest since start-up and a histogram.
// A turn that takes long delays every request queued behind it on that shard, so this is the
// figure that shows a stall (a whole-table rehash used to hold a shard for 0.6 s at 8M records).
//
// Timing reads the steady clock (vDSO, no system call) twice per turn. Not thread-safe: the
// shard's thread records, and snapshots (copies) go to the control thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "common/codec/histogram.h"

namespace imhash {

struct TurnStats {
  // Upper bounds of the histogram's buckets in seconds (+Inf last, implied).
  static constexpr std::array<double, 10> kBounds = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3,
                                                     3e-3, 1e-2, 3e-2, 1e-1, 1.0};

  uint64_t longest_ns = 0;
  Histogram<kBounds> seconds;  // "imhash_hash_turn_seconds"

  void record(std::chrono::steady_clock::duration d) {
    const auto ns = static_cast<uint64_t>(std::chrono::nanoseconds(d).count());
    if (ns > longest_ns) longest_ns = ns;
    seconds.record(static_cast<double>(ns) * 1e-9);
  }
};

// Times one turn from construction to destruction into `stats`.
class TurnTimer {
 public:
  explicit TurnTimer(TurnStats& stats) : stats_(stats) {}
  ~TurnTimer() { stats_.record(std::chrono::steady_clock::now() - start_); }
  TurnTimer(const TurnTimer&) = delete;
  TurnTimer& operator=(const TurnTimer&) = delete;

 private:
  TurnStats& stats_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace imhash
