// ConfigService's /metrics: the table version, the store, heartbeats, and each node's state, as
// the Prometheus text format (common/metrics.h).
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/printable.h"
#include "config_server/config_service.h"

namespace json = boost::json;

namespace imhash {

using control::StreamState;

std::string ConfigService::metrics_text() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  MetricsText m;
  m.gauge("imhash_config_table_version", "current routing table version",
          static_cast<double>(store_.version()));
  m.gauge("imhash_config_leader",
          "1 while this config server leads (always, alone on a file store); 0 as a standby",
          leading_ ? 1 : 0);
  m.counter("imhash_config_store_writes_total",
            "writes of the state (a table change, the pending purges) to its store",
            static_cast<double>(store_writes_));
  m.counter("imhash_config_store_write_errors_total", "writes of the state that failed",
            static_cast<double>(store_write_errors_));
  m.counter("imhash_config_store_write_seconds_total", "time spent writing the state",
            store_total_ms_ / 1000);
  m.gauge("imhash_config_store_last_write_seconds", "how long the latest write of the state took",
          store_last_ms_ / 1000);
  m.counter("imhash_config_heartbeats_total", "heartbeats handled",
            static_cast<double>(heartbeats_));
  if (!heartbeat_lag_counts_.empty()) {
    std::vector<uint64_t> cumulative(heartbeat_lag_counts_.size());
    uint64_t run = 0;
    for (size_t i = 0; i < cumulative.size(); ++i) cumulative[i] = run += heartbeat_lag_counts_[i];
    m.histogram("imhash_config_heartbeat_lag_seconds",
                "from a heartbeat's sending (the node's wall clock) to its handling here",
                kHeartbeatLagBounds, cumulative, heartbeat_lag_sum_s_);
  }
  if (hooks_.metrics) hooks_.metrics(m);
  m.counter("imhash_config_auth_refused_total",
            "node links refused because the node did not prove the cluster key",
            static_cast<double>(auth_refused_));
  int up[2] = {0, 0}, down[2] = {0, 0}, lagging[2] = {0, 0};
  for (const auto& [key, n] : registry_.nodes()) {
    const int role = n.is_hash() ? 0 : 1;
    (!n.up ? down : n.lagging ? lagging : up)[role] += 1;
    const MetricsText::Labels who{{"role", control::to_string(n.role)}, {"name", n.name}};
    m.gauge("imhash_config_node_version", "table version each node acknowledged",
            static_cast<double>(n.version), who);
    m.gauge("imhash_config_node_up", "1 while the node heartbeats", n.up ? 1 : 0, who);
    m.gauge("imhash_config_node_lagging",
            "1 while the node heartbeats but has not acknowledged the current version within the "
            "DOWN window after its push",
            n.up && n.lagging ? 1 : 0, who);
    if (const auto* r = n.stats.if_contains("records"); r && r->is_number()) {
      m.gauge("imhash_config_node_records", "records a hash server holds (from its heartbeat)",
              r->to_number<double>(), who);
    }
    if (n.is_hash()) {
      m.gauge("imhash_config_replication_lag",
              "writes the login servers hold for a hash server because its links cannot take "
              "them: not applied there yet (replicas; from the login servers' heartbeats)",
              static_cast<double>(replication_lag(n.name)), {{"name", n.name}});
    }
  }
  // Refills in progress (replicas), and how far along.
  for (const json::value& r : refills_.json(monotonic_ns())) {
    const json::object& o = r.as_object();
    const MetricsText::Labels who{{"name", json::value_to<std::string>(o.at("server"))}};
    m.gauge("imhash_config_refill_progress",
            "a hash server being refilled from its peers: the mean share of their slots their "
            "streams have examined (0..1)",
            o.at("progress").to_number<double>(), who);
    m.gauge("imhash_config_refill_records_sent",
            "records the peers of a hash server being refilled have had acknowledged by it",
            o.at("records_sent").to_number<double>(), who);
  }
  for (int role = 0; role < 2; ++role) {
    const char* name = control::to_string(role == 0 ? control::Role::kHash : control::Role::kLogin);
    m.gauge("imhash_config_nodes", "nodes by role and state", up[role],
            {{"role", name}, {"state", "up"}});
    m.gauge("imhash_config_nodes", "nodes by role and state", down[role],
            {{"role", name}, {"state", "down"}});
    m.gauge("imhash_config_nodes", "nodes by role and state", lagging[role],
            {{"role", name}, {"state", "lagging"}});
  }
  m.counter("imhash_config_rejected_acks_total",
            "acks of a version above the latest pushed: rejected, not applied",
            static_cast<double>(registry_.rejected(cluster::VersionSource::kAck)));
  for (const auto from : {cluster::VersionSource::kRegister, cluster::VersionSource::kHeartbeat}) {
    m.counter("imhash_config_rejected_versions_total",
              "registers and heartbeats naming a version above the latest pushed: not trusted for "
              "convergence",
              static_cast<double>(registry_.rejected(from)),
              {{"message", cluster::version_source_name(from)}});
  }
  m.counter("imhash_config_registrations_refused_total",
            "registrations refused because a live link holds the name",
            static_cast<double>(refused_name_held_));
  if (const std::optional<double> ms = registry_.convergence_ms()) {
    m.gauge("imhash_config_convergence_seconds",
            "time the last table version took to reach every node that is up and not lagging",
            *ms / 1000.0);
  }
  m.gauge(
      "imhash_config_converged",
      "1 when every node that is up and not lagging runs the current table version (imctl status: "
      "converged)",
      converged() ? 1 : 0);
  m.gauge("imhash_config_pending_purge", "1 while any automatic purge is pending",
          pending_.empty() ? 0 : 1);
  m.gauge("imhash_config_pending_purges",
          "automatic purges pending (one per hash server that may hold old copies)",
          static_cast<double>(pending_.size()));
  // Each hash server's latest stream report, one metric after the other.
  struct StreamMetric {
    const char* name;
    const char* help;
    double (*value)(const control::StreamReport&);
  };
  static constexpr StreamMetric kStreamMetrics[] = {
      {"imhash_config_stream_running", "1 while the hash server's outbound stream runs",
       [](const control::StreamReport& r) { return r.state == StreamState::kRunning ? 1.0 : 0.0; }},
      {"imhash_config_stream_records_sent",
       "records the hash server's latest stream has had acknowledged by their new owners",
       [](const control::StreamReport& r) { return static_cast<double>(r.sent); }},
      {"imhash_config_stream_records_per_second", "the stream's rate over the last second or so",
       [](const control::StreamReport& r) { return static_cast<double>(r.rate); }},
      {"imhash_config_stream_eta_seconds",
       "estimated time until the stream is done (0 unless running)",
       [](const control::StreamReport& r) { return static_cast<double>(r.eta_ms) / 1000.0; }},
      {"imhash_config_stream_scanned_ratio",
       "share of the hash server's slots its stream has examined (1 when done)",
       [](const control::StreamReport& r) {
         if (r.state == StreamState::kDone) return 1.0;
         return r.total == 0
                    ? 0.0
                    : std::min(1.0, static_cast<double>(r.scanned) / static_cast<double>(r.total));
       }},
  };
  for (const StreamMetric& metric : kStreamMetrics) {
    for (const auto& [key, n] : registry_.nodes()) {
      if (n.is_hash() && n.stream) {
        m.gauge(metric.name, metric.help, metric.value(*n.stream), {{"name", n.name}});
      }
    }
  }
  return m.str();
}

// ---------------------------------------------------------------------------------------------

}  // namespace imhash
