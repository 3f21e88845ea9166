// Pacing arithmetic for the two load modes and the phases of a run, kept apart from the sockets
// and the clock so a unit test can check it with times of its choosing.
//
// A run (RunPhases): a warm-up from `start`, then the measured part, after which nothing new is
// sent. Figures count only what was scheduled from `measure_from` on, and the elapsed time of the
// summary is the measured part (plus the drain after it), never the warm-up.
//
// Open loop (--rate R): request k (k = 0, 1, ...) is due at start + k/R whatever the replies do,
// and its latency is measured from that due time, not from when it actually left: a simulator
// that falls behind (or a server that stalls it) then shows up as latency, instead of silently
// sending less (no coordinated omission).
// Closed loop (--window W): a new request goes out whenever fewer than W are in flight.
//
// Plain values; any thread may use its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace imhash::sim {

struct RunPhases {
  RunPhases() = default;
  RunPhases(int64_t start_ns, double warmup_s, double duration_s)
      : start(start_ns),
        measure_from(start_ns + std::llround(warmup_s * 1e9)),
        end(measure_from + std::llround(duration_s * 1e9)) {}

  // Whether something scheduled at `t` belongs to the warm-up (and so to no figure).
  bool in_warmup(int64_t t) const { return t < measure_from; }
  // Seconds of the measured part at `now_ns`: 0 during the warm-up.
  double elapsed_s(int64_t now_ns) const {
    return static_cast<double>(std::max<int64_t>(0, now_ns - measure_from)) / 1e9;
  }

  int64_t start = 0;
  int64_t measure_from = 0;  // the end of the warm-up
  int64_t end = 0;           // no new request from here on
};

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
