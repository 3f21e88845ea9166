// Histogram: how many observations fell at or below each of a fixed list of upper bounds, and
// their sum: the one histogram of every daemon's /metrics (the login server's request latency,
// the hash server's event-loop turns, the config server's heartbeat lag). Counts are kept per
// bucket, not cumulative, so recording touches one counter; MetricsText::histogram
// (common/runtime/metrics.h) renders them as Prometheus's cumulative buckets.
//
// The bounds are part of the type (a reference to a constant array), so two histograms add up
// only when their buckets are the same, and an instance holds nothing but its counts.
//
// Pure (no clock, no I/O, no log). Threads: a plain value with no lock and no atomic. One thread
// records into its own histogram (a worker, a shard, the config server's controller); others read
// copies of it (the daemons sample copies for /metrics), so the data path stays a few compares and
// two adds, with no allocation.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace imhash {

// kBounds: the buckets' upper bounds, ascending (an array of double with static storage); a last
// bucket, above them all (Prometheus's "+Inf"), is implied.
template <const auto& kBounds>
class Histogram {
 public:
  static_assert(std::is_sorted(kBounds.begin(), kBounds.end()), "bounds must ascend");
  static constexpr size_t kBuckets = kBounds.size() + 1;

  // Counts `value` in the first bucket whose bound is at least `value` ("le", as Prometheus).
  void record(double value) {
    size_t i = 0;
    while (i < kBounds.size() && value > kBounds[i]) ++i;
    ++counts_[i];
    sum_ += value;
  }

  // Adds another's counts (a server's figures are the sum of its threads').
  Histogram& operator+=(const Histogram& o) {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    sum_ += o.sum_;
    return *this;
  }

  static constexpr std::span<const double> bounds() { return kBounds; }
  // Per bucket (not cumulative), the last one above every bound.
  std::span<const uint64_t, kBuckets> counts() const { return counts_; }
  uint64_t count() const {
    uint64_t n = 0;
    for (const uint64_t c : counts_) n += c;
    return n;
  }
  double sum() const { return sum_; }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  double sum_ = 0;
};

}  // namespace imhash
