// LatencyHistogram: bucket arithmetic (contiguous, exact below 256, at most 1/128 wide above),
// percentiles within 1 % of the exact order statistic, merge, reset, clamping.
#include "tools/udp_sim/latency_histogram.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tools/udp_sim/rng.h"

using imhash::sim::LatencyHistogram;
using imhash::sim::Rng;

namespace {

// The histogram is ~34 KiB: keep it off the test's stack.
std::unique_ptr<LatencyHistogram> make() { return std::make_unique<LatencyHistogram>(); }

// The order statistic percentile() approximates: the value of rank round(pct% of n), >= 1.
uint64_t exact_percentile(std::vector<uint64_t> sorted, double pct) {
  const auto n = sorted.size();
  auto rank = static_cast<size_t>(pct / 100.0 * static_cast<double>(n) + 0.5);
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

}  // namespace

TEST_CASE("latency histogram: buckets are contiguous and at most 1/128 of their values wide") {
  using H = LatencyHistogram;
  CHECK(H::lowest_of(0) == 0);
  for (size_t i = 0; i + 1 < H::kBuckets; ++i) {
    REQUIRE(H::highest_of(i) + 1 == H::lowest_of(i + 1));
    REQUIRE(H::index_of(H::lowest_of(i)) == i);
    REQUIRE(H::index_of(H::highest_of(i)) == i);
    const uint64_t width = H::highest_of(i) - H::lowest_of(i) + 1;
    if (i < H::kSubCount) {
      REQUIRE(width == 1);  // exact below 256
    } else {
      REQUIRE(width * 128 <= H::lowest_of(i));
    }
  }
  CHECK(H::highest_of(H::kBuckets - 1) == H::kMaxValue);
  CHECK(H::index_of(H::kMaxValue) == H::kBuckets - 1);
  // Around every power of two.
  for (unsigned k = 1; k < 40; ++k) {
    for (uint64_t v : {(uint64_t{1} << k) - 1, uint64_t{1} << k, (uint64_t{1} << k) + 1}) {
      const size_t i = H::index_of(v);
      CHECK(H::lowest_of(i) <= v);
      CHECK(v <= H::highest_of(i));
    }
  }
}

TEST_CASE("latency histogram: values below 256 are exact") {
  auto h = make();
  for (uint64_t v = 0; v < 256; ++v) h->record(v);
  CHECK(h->count() == 256);
  CHECK(h->min() == 0);
  CHECK(h->max() == 255);
  CHECK(h->percentile(50) == 127);  // rank 128
  CHECK(h->percentile(100) == 255);
  CHECK(h->percentile(0) == 0);
  CHECK(h->mean() == doctest::Approx(127.5));
}

TEST_CASE("latency histogram: percentiles of a wide sample are within 1 % of the exact ones") {
  Rng rng(42);
  auto h = make();
  std::vector<uint64_t> values;
  values.reserve(200'000);
  for (int i = 0; i < 200'000; ++i) {
    // Log-uniform from 1 us to ~1 s, and a few huge outliers.
    const double e = static_cast<double>(rng.below(1'000'000)) / 1'000'000.0 * 20.0;
    uint64_t v = static_cast<uint64_t>(std::exp2(e));
    if (i % 10'000 == 0) v = 5'000'000'000ull + rng.below(1'000'000);
    values.push_back(v);
    h->record(v);
  }
  std::sort(values.begin(), values.end());
  for (double pct : {0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    CAPTURE(pct);
    const uint64_t exact = exact_percentile(values, pct);
    const uint64_t got = h->percentile(pct);
    CHECK(got >= exact);
    CHECK(static_cast<double>(got) <= static_cast<double>(exact) * 1.01 + 1);
  }
  CHECK(h->min() == values.front());
  CHECK(h->max() == values.back());
  CHECK(h->percentile(100) == values.back());
}

TEST_CASE("latency histogram: merge equals recording everything in one, reset empties") {
  auto a = make();
  auto b = make();
  auto all = make();
  Rng rng(7);
  for (int i = 0; i < 10'000; ++i) {
    const uint64_t v = rng.below(100'000);
    (i % 3 == 0 ? *a : *b).record(v);
    all->record(v);
  }
  a->merge(*b);
  CHECK(a->count() == all->count());
  CHECK(a->min() == all->min());
  CHECK(a->max() == all->max());
  CHECK(a->mean() == doctest::Approx(all->mean()));
  for (double pct : {1.0, 50.0, 99.0, 99.9}) CHECK(a->percentile(pct) == all->percentile(pct));

  auto empty = make();
  a->merge(*empty);
  CHECK(a->count() == all->count());
  a->reset();
  CHECK(a->count() == 0);
  CHECK(a->percentile(50) == 0);
  CHECK(a->min() == 0);
  CHECK(a->max() == 0);
  CHECK(a->mean() == 0);
}

TEST_CASE("latency histogram: values past the maximum are clamped, record(v, n) counts n") {
  auto h = make();
  h->record(UINT64_MAX);
  CHECK(h->max() == LatencyHistogram::kMaxValue);
  h->record(10, 9);
  CHECK(h->count() == 10);
  CHECK(h->percentile(90) == 10);
  CHECK(h->percentile(99) == LatencyHistogram::kMaxValue);
}
