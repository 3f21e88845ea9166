#include "tools/bench/metrics_scrape.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "harness/http_get.h"

namespace imhash::bench {

MetricsPage::MetricsPage(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      samples_[line.substr(0, space)] = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      // A line cut short (the daemon went away mid-page) is not a sample.
    }
  }
}

MetricsPage MetricsPage::scrape(const std::string& address) {
  return MetricsPage(test::scrape(address));
}

double MetricsPage::value(const std::string& key) const {
  const auto it = samples_.find(key);
  return it == samples_.end() ? 0 : it->second;
}

double MetricsPage::total(const std::string& name) const {
  double sum = 0;
  // The keys sort `name` first, then `name{...}`, then other names sharing the prefix.
  for (auto it = samples_.lower_bound(name); it != samples_.end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, name.size(), name) != 0) break;
    if (key.size() == name.size() || key[name.size()] == '{') sum += it->second;
  }
  return sum;
}

namespace {

// Cumulative counts by bound, summed over the label sets.
std::map<double, double> buckets_of(const MetricsPage& page, const std::string& name) {
  const std::string prefix = name + "_bucket{";
  std::map<double, double> out;
  for (auto it = page.samples().lower_bound(prefix); it != page.samples().end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, prefix.size(), prefix) != 0) break;
    const auto at = key.find("le=\"", prefix.size());
    if (at == std::string::npos) continue;
    const auto start = at + 4;
    const std::string le = key.substr(start, key.find('"', start) - start);
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le);
    out[bound] += it->second;
  }
  return out;
}

}  // namespace

Histogram Histogram::of(const MetricsPage& page, const std::string& name) {
  return between(MetricsPage(), page, name);
}

Histogram Histogram::between(const MetricsPage& before, const MetricsPage& after,
                             const std::string& name) {
  const std::map<double, double> a = buckets_of(before, name);
  Histogram h;
  // The bounds are those of the later page (a bucket the earlier one lacks counted from 0).
  for (const auto& [bound, cumulative] : buckets_of(after, name)) {
    const auto old = a.find(bound);
    h.buckets.emplace_back(bound, cumulative - (old == a.end() ? 0 : old->second));
  }
  h.count = after.total(name + "_count") - before.total(name + "_count");
  h.sum = after.total(name + "_sum") - before.total(name + "_sum");
  return h;
}

BucketValue quantile(const Histogram& h, double q) {
  if (h.buckets.empty() || h.count <= 0) throw std::invalid_argument("quantile of no observation");
  const double rank = q * h.count;
  double lower = 0, below = 0;  // the previous bucket's bound and cumulative count
  for (const auto& [bound, cumulative] : h.buckets) {
    if (cumulative >= rank) {
      if (std::isinf(bound)) return {lower, true};
      const double share = cumulative > below ? (rank - below) / (cumulative - below) : 1;
      return {lower + (bound - lower) * share, false};
    }
    lower = bound;
    below = cumulative;
  }
  // The buckets hold fewer than `count` (pages from a daemon mid-update): the top is all we know.
  return {lower, true};
}

BucketValue highest_bucket(const Histogram& h) {
  double top = 0, below = 0, largest_finite = 0;
  for (const auto& [bound, cumulative] : h.buckets) {
    if (cumulative > below) top = bound;
    if (!std::isinf(bound)) largest_finite = bound;
    below = cumulative;
  }
  if (std::isinf(top)) return {largest_finite, true};
  return {top, false};
}

}  // namespace imhash::bench
