// metrics_scrape: a daemon's /metrics page parsed into its samples, the growth of its counters
// between two pages (a measurement window), and quantiles of a Prometheus histogram computed as
// Prometheus's histogram_quantile does (linear within a bucket): what bench.sh did with awk and
// embedded Python. Main thread only (the driver's), as every scenario.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace imhash::bench {

// One /metrics page: each sample's value by its whole key, `name{labels}` as the page writes it
// (`imhash_config_nodes{role="login",state="up"}`).
class MetricsPage {
 public:
  MetricsPage() = default;
  explicit MetricsPage(const std::string& text);
  // GET http://ADDRESS/metrics, parsed (an empty page when the daemon does not answer).
  static MetricsPage scrape(const std::string& address);

  bool empty() const { return samples_.empty(); }
  // The sample with exactly this key; 0 if the page has none.
  double value(const std::string& key) const;
  // The sum of every sample of metric `name` over its label sets (`name` and `name{...}`).
  double total(const std::string& name) const;
  const std::map<std::string, double>& samples() const { return samples_; }

 private:
  std::map<std::string, double> samples_;
};

// A histogram: its cumulative bucket counts by upper bound (ascending, +Inf last as infinity),
// its count and sum, each summed over the metric's label sets other than `le`.
struct Histogram {
  std::vector<std::pair<double, double>> buckets;  // (le, observations <= le)
  double count = 0;
  double sum = 0;

  // Histogram `name` (without the _bucket suffix) on `page`; no buckets if it has none.
  static Histogram of(const MetricsPage& page, const std::string& name);
  // What was observed between two pages of the same daemon: `after` less `before`.
  static Histogram between(const MetricsPage& before, const MetricsPage& after,
                           const std::string& name);
};

// A value read off a histogram's buckets, in the histogram's unit.
struct BucketValue {
  double value = 0;
  // It lies in the +Inf bucket: `value` is the largest finite bound, a lower bound only.
  bool beyond_last_bound = false;
};

// Quantile q (0..1) as Prometheus's histogram_quantile: the bucket holding rank q * count, linear
// within it (the first bucket starts at 0). Needs count > 0 and buckets.
BucketValue quantile(const Histogram& h, double q);

// The upper bound of the highest bucket any observation fell in: an upper bound of the maximum
// (beyond_last_bound: it lies above the largest finite bound).
BucketValue highest_bucket(const Histogram& h);

}  // namespace imhash::bench
