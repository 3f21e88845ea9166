// Histogram (common/codec/histogram.h) and its Prometheus rendering (MetricsText::histogram): a
// value on a bound counts in that bound's bucket ("le"), one above every bound in "+Inf"; the
// rendered buckets are cumulative and _count is their total; adding histograms adds counts and
// sums.
#include "common/codec/histogram.h"

#include <doctest/doctest.h>

#include <array>

#include "common/runtime/metrics.h"

namespace {

using imhash::Histogram;
using imhash::MetricDef;
using imhash::MetricsText;

constexpr std::array<double, 3> kBounds = {0.001, 0.01, 0.1};
using Seconds = Histogram<kBounds>;

constexpr MetricDef kWait{"test_wait_seconds", MetricDef::Type::kHistogram, "time waited"};

}  // namespace

TEST_CASE("histogram: a value on a bound counts in its bucket, one above them all in the last") {
  Seconds h;
  CHECK(h.count() == 0);
  h.record(0);
  h.record(0.001);   // on the first bound: le="0.001"
  h.record(0.0011);  // just above it
  h.record(0.1);
  h.record(7);  // above every bound: +Inf
  CHECK(h.counts()[0] == 2);
  CHECK(h.counts()[1] == 1);
  CHECK(h.counts()[2] == 1);
  CHECK(h.counts()[3] == 1);
  CHECK(h.count() == 5);
  CHECK(h.sum() == doctest::Approx(7.1021));
}

TEST_CASE("histogram: adding one to another adds the counts bucket by bucket and the sums") {
  Seconds a, b;
  a.record(0.005);
  b.record(0.005);
  b.record(1);
  a += b;
  CHECK(a.counts()[1] == 2);
  CHECK(a.counts()[3] == 1);
  CHECK(a.count() == 3);
  CHECK(a.sum() == doctest::Approx(1.01));
  CHECK(b.count() == 2);  // unchanged
}

TEST_CASE("histogram: rendered as cumulative buckets with le, then _sum and _count") {
  Seconds h;
  h.record(0.0005);
  h.record(0.05);
  h.record(0.05);
  h.record(3);
  MetricsText m;
  m.histogram(kWait, h, {{"shard", "1"}});
  m.histogram(kWait, Seconds{}, {{"shard", "2"}});  // HELP and TYPE once per name
  CHECK(m.str() ==
        "# HELP test_wait_seconds time waited\n"
        "# TYPE test_wait_seconds histogram\n"
        "test_wait_seconds_bucket{shard=\"1\",le=\"0.001\"} 1\n"
        "test_wait_seconds_bucket{shard=\"1\",le=\"0.01\"} 1\n"
        "test_wait_seconds_bucket{shard=\"1\",le=\"0.1\"} 3\n"
        "test_wait_seconds_bucket{shard=\"1\",le=\"+Inf\"} 4\n"
        "test_wait_seconds_sum{shard=\"1\"} 3.1005\n"
        "test_wait_seconds_count{shard=\"1\"} 4\n"
        "test_wait_seconds_bucket{shard=\"2\",le=\"0.001\"} 0\n"
        "test_wait_seconds_bucket{shard=\"2\",le=\"0.01\"} 0\n"
        "test_wait_seconds_bucket{shard=\"2\",le=\"0.1\"} 0\n"
        "test_wait_seconds_bucket{shard=\"2\",le=\"+Inf\"} 0\n"
        "test_wait_seconds_sum{shard=\"2\"} 0\n"
        "test_wait_seconds_count{shard=\"2\"} 0\n");
}
