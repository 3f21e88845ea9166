// LatencyHistogram: a log-linear histogram of latencies in microseconds, in the manner of
// HdrHistogram. Values below 256 are counted exactly; above, each power of two [2^k, 2^(k+1)) is
// split into 128 equal buckets, so a bucket is at most 1/128 (0.78 %) of its values wide. A
// percentile is reported as the highest value its bucket can hold (clamped to the largest value
// recorded), so it is never below the true value and at most 0.78 % above it. Values above
// kMaxValue (about 12.7 days) are clamped to it.
//
// Fixed size (about 34 KiB), no allocation: record() is a few instructions. Not thread-safe: one
// thread records and reads; merge() combines histograms from several places.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace imhash::sim {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 8;                // values < 2^kSubBits are exact
  static constexpr uint64_t kSubCount = 1u << kSubBits;  // 256
  static constexpr uint64_t kHalf = kSubCount / 2;       // buckets per power of two above
  static constexpr unsigned kMaxShift = 32;
  static constexpr uint64_t kMaxValue = (uint64_t{1} << (kMaxShift + kSubBits)) - 1;
  static constexpr size_t kBuckets = kMaxShift * kHalf + kSubCount;

  // Bucket of `v` (v <= kMaxValue).
  static constexpr size_t index_of(uint64_t v) {
    if (v < kSubCount) return static_cast<size_t>(v);
    const unsigned shift = static_cast<unsigned>(std::bit_width(v)) - kSubBits;
    return static_cast<size_t>(shift * kHalf + (v >> shift));
  }
  static constexpr uint64_t lowest_of(size_t i) {
    if (i < kSubCount) return i;
    const uint64_t shift = (i - kSubCount) / kHalf + 1;
    const uint64_t mantissa = (i - kSubCount) % kHalf + kHalf;
    return mantissa << shift;
  }
  static constexpr uint64_t highest_of(size_t i) {
    if (i < kSubCount) return i;
    const uint64_t shift = (i - kSubCount) / kHalf + 1;
    return lowest_of(i) + (uint64_t{1} << shift) - 1;
  }

  void record(uint64_t us, uint64_t n = 1) {
    us = std::min(us, kMaxValue);
    counts_[index_of(us)] += n;
    count_ += n;
    sum_ += us * n;
    min_ = std::min(min_, us);
    max_ = std::max(max_, us);
  }

  void merge(const LatencyHistogram& o) {
    if (o.count_ == 0) return;
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    count_ += o.count_;
    sum_ += o.sum_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }

  void reset() { *this = LatencyHistogram{}; }

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const {
    return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0;
  }

  // The value below or at which `pct` percent (0..100) of the recorded values lie; 0 when empty.
  uint64_t percentile(double pct) const {
    if (count_ == 0) return 0;
    pct = std::clamp(pct, 0.0, 100.0);
    // Rank of the wanted value, 1-based: at least 1, at most count_.
    auto rank = static_cast<uint64_t>(pct / 100.0 * static_cast<double>(count_) + 0.5);
    rank = std::clamp<uint64_t>(rank, 1, count_);
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::clamp(highest_of(i), min_, max_);
    }
    return max_;
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace imhash::sim
