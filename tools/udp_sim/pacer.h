// Pacing arithmetic for the two load modes, kept apart from the sockets so a unit test can check
// it.
//
// Open loop (--rate R): request k (k = 0, 1, ...) is due at start + k/R whatever the replies do,
// and its latency is measured from that due time, not from when it actually left: a simulator
// that falls behind (or a server that stalls it) then shows up as latency, instead of silently
// sending less (no coordinated omission).
// Closed loop (--window W): a new request goes out whenever fewer than W are in flight.
//
// Plain values; any thread may use its own.
#pragma once

#include <cmath>
#include <cstdint>

namespace imhash::sim {

class OpenLoopSchedule {
 public:
  // rate > 0 requests per second, from start_ns on.
  OpenLoopSchedule(double rate, int64_t start_ns) : ns_per_request_(1e9 / rate), start_(start_ns) {}

  // When request k is due.
  int64_t due_at(uint64_t k) const {
    return start_ + static_cast<int64_t>(std::llround(static_cast<double>(k) * ns_per_request_));
  }

  // How many requests are due at or before now_ns (request 0 is due at start).
  uint64_t due_by(int64_t now_ns) const {
    if (now_ns < start_) return 0;
    auto n = static_cast<uint64_t>(static_cast<double>(now_ns - start_) / ns_per_request_) + 1;
    // Settle the floating-point edge so that due_by(due_at(k)) == k + 1 exactly.
    while (n > 0 && due_at(n - 1) > now_ns) --n;
    while (due_at(n) <= now_ns) ++n;
    return n;
  }

 private:
  double ns_per_request_;
  int64_t start_;
};

// Closed loop: requests to send now to bring `in_flight` back up to `window`.
inline uint32_t closed_loop_quota(uint32_t window, uint32_t in_flight) {
  return in_flight >= window ? 0 : window - in_flight;
}

}  // namespace imhash::sim
