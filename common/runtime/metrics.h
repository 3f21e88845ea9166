// Prometheus metrics: a text-format writer (exposition format 0.0.4) and a small HTTP server that
// answers GET /metrics with what a render callback returns, followed by the process's own memory
// figures (common/runtime/process_metrics.h), for `--metrics HOST:PORT` on every daemon.
//
// MetricsText: a plain value; any thread. MetricsServer: construct, start() and stop() on the
// thread that runs `ctx` (the daemon's control thread); `render` runs there too, so it must only
// read state that thread owns (the daemons keep sampled copies of their data-path counters).
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/codec/histogram.h"
#include "common/codec/metric_def.h"

namespace imhash {

class MetricsText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  // Metrics are written from their declarations in a table (common/codec/metric_def.h), so that a
  // metric's type and help are said once; "# HELP" and "# TYPE" go before a name's first sample.
  //
  // A sample of a gauge or a counter (a histogram: histogram() below).
  void add(const MetricDef& metric, double value, const Labels& labels = {});
  // A histogram declared in a table: one "_bucket" sample per bound, cumulative, with its bound as
  // label "le" ("+Inf" last), then "_sum" and "_count".
  template <const auto& kBounds>
  void histogram(const MetricDef& metric, const Histogram<kBounds>& h, const Labels& labels = {}) {
    histogram_samples(metric, h.bounds(), h.counts(), h.sum(), labels);
  }
  const std::string& str() const { return out_; }

 private:
  // `counts` per bucket (not cumulative): one more than `bounds`.
  void histogram_samples(const MetricDef& metric, std::span<const double> bounds,
                         std::span<const uint64_t> counts, double sum, const Labels& labels);
  void header(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, double value, const Labels& labels);
  std::string out_;
  std::vector<std::string> declared_;
};

class MetricsServer {
 public:
  // Binds now (throws boost::system::system_error when it cannot).
  MetricsServer(boost::asio::io_context& ctx, const std::string& host, uint16_t port,
                std::function<std::string()> render);
  ~MetricsServer();
  std::string local_address() const;
  void start();
  void stop();

  struct State;  // shared with the connections, which may outlive a stop()

 private:
  std::shared_ptr<State> state_;
};

}  // namespace imhash
