// NodeControl: the control-thread side that every data daemon (hash and login servers) has — its
// link to the config server (--config, one address or several), the address it registers there
// (--advertise), where it keeps its last table (--state-dir, common/runtime/saved_table.h) and its
// Prometheus endpoint (--metrics) — declared, read, started and stopped in one place.
//
// Thread rules: construct and call it on the daemon's main thread, the one that runs `ctx`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/codec/thread_check.h"
#include "common/links/config_link.h"
#include "common/runtime/cluster_key.h"
#include "common/runtime/metrics.h"
#include "common/runtime/options.h"
#include "common/runtime/tls_options.h"

namespace imhash {

// What the /metrics of every hash and login server shows besides its own table
// (hash_server/hash_metrics.h, login_server/login_counters.h), declared once: the daemon writes
// the table version it runs; NodeControl::start_metrics adds the config link's figures.
namespace node_metrics {
inline constexpr MetricDef kTableVersion{"imhash_table_version", MetricDef::Type::kGauge,
                                         "routing table version this server runs"};
inline constexpr MetricDef kConfigLinkUp{"imhash_config_link_up", MetricDef::Type::kGauge,
                                         "1 while registered with the config server"};
inline constexpr MetricDef kConfigLinkRefusedTotal{
    "imhash_config_link_refused_total", MetricDef::Type::kCounter,
    "config link sessions given up because the config server did not prove the cluster key"};
}  // namespace node_metrics

class NodeControl {
 public:
  struct Endpoints {
    std::string
        config_address;        // config server HOST:PORT, or several joined by commas; empty: none
    std::string metrics_host;  // empty: no /metrics
    uint16_t metrics_port = 0;
    // --advertise: the address registered with the config server; empty host: the bound one.
    std::string advertise_host;
    uint16_t advertise_port = 0;  // 0: the bound port
    std::string state_dir;        // --state-dir; empty: no saved table
    ClusterKey cluster_key;       // --cluster-key-file, --insecure (common/runtime/cluster_key.h)
    TlsOptions tls;               // --tls-cert, --tls-key, --tls-ca (common/runtime/tls_options.h)

    bool has_config_server() const { return !config_address.empty(); }
    // What to register, given the address the daemon bound: --advertise with its port 0 filled
    // in, else the bound address.
    std::string advertised(const std::string& bound_host, uint16_t bound_port) const;
  };

  // Declares --config (with the daemon's own help text; it takes a list, see ConfigAddresses),
  // --advertise (with the daemon's help text), --state-dir, --metrics, --cluster-key-file,
  // --insecure, --tls-cert, --tls-key and --tls-ca.
  static void add_options(Options& opts, const std::string& config_help,
                          const std::string& advertise_help);
  // Reads them; throws UsageError for a malformed address or an unspecified --advertise (0.0.0.0,
  // ::: nobody can dial it).
  static Endpoints endpoints(const Options& opts);

  NodeControl(boost::asio::io_context& ctx, Endpoints endpoints);
  NodeControl(const NodeControl&) = delete;
  NodeControl& operator=(const NodeControl&) = delete;

  bool has_config_server() const { return endpoints_.has_config_server(); }
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
