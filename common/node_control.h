// NodeControl: the control-thread side that every data daemon (hash and login servers) has — its
// link to the config server (--config) and its Prometheus endpoint (--metrics) — declared, read,
// started and stopped in one place.
//
// Thread rules: construct and call it on the daemon's main thread, the one that runs `ctx`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/config_link.h"
#include "common/metrics.h"
#include "common/options.h"
#include "common/thread_check.h"

namespace imhash {

class NodeControl {
 public:
  struct Endpoints {
    std::string config_address;  // config server HOST:PORT; empty: none
    std::string metrics_host;    // empty: no /metrics
    uint16_t metrics_port = 0;
  };

  // Declares --config (with the daemon's own help text) and --metrics.
  static void add_options(Options& opts, const std::string& config_help);
  // Reads them; throws UsageError for a malformed address.
  static Endpoints endpoints(const Options& opts);

  NodeControl(boost::asio::io_context& ctx, Endpoints endpoints);
  NodeControl(const NodeControl&) = delete;
  NodeControl& operator=(const NodeControl&) = delete;

  bool has_config_server() const { return !endpoints_.config_address.empty(); }
  // Registers with the config server as `self` (its pid filled in) and keeps the link; nothing
  // without --config.
  void start_config_link(control::Register self, ConfigLink::Callbacks callbacks);
  // Null before start_config_link() or without --config.
  ConfigLink* config_link() const { return config_link_.get(); }
  // Serves /metrics with what `render` writes, plus the config link's state; prints its
  // "listening on" line. Nothing without --metrics.
  void start_metrics(std::function<void(MetricsText&)> render);
  void stop();

 private:
  boost::asio::io_context& ctx_;
  const Endpoints endpoints_;
  ThreadCheck thread_;
  std::unique_ptr<ConfigLink> config_link_;
  std::unique_ptr<MetricsServer> metrics_;
};

}  // namespace imhash
