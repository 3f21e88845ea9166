// MetricDef: a metric as a daemon's table declares it, once: its name, its type and its help
// (pelikan declares its metrics the same way, in one table beside the module). The tables:
// login_server/login_counters.h, hash_server/hash_metrics.h, config_server/config_metrics.h, and
// node_metrics in common/links/node_control.h for what every hash and login server shows.
// MetricsText (common/runtime/metrics.h) writes samples of them.
//
// Pure and apart from metrics.h (which has the HTTP server, so Asio), so that a table can sit
// beside a module that must not include Asio (the login server's request logic). Plain constants:
// any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace imhash {

struct MetricDef {
  enum class Type : uint8_t { kGauge, kCounter, kHistogram };
  std::string_view name;
  Type type;
  std::string_view help;
};

}  // namespace imhash
