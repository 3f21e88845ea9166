// ConfigService's /metrics: the table version, the store, heartbeats, and each node's state, as
// the Prometheus text format (common/runtime/metrics.h).
#include <spdlog/spdlog.h>

#include "common/codec/printable.h"
#include "common/runtime/clock.h"
#include "common/runtime/metrics.h"
#include "config_server/config_metrics.h"
#include "config_server/config_service.h"

namespace json = boost::json;

namespace imhash {

using control::StreamState;

std::string ConfigService::metrics_text() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  MetricsText m;
  m.add(config_metrics::kTableVersion, static_cast<double>(store_.version()));
  m.add(config_metrics::kLeader, leading_ ? 1 : 0);
  m.add(config_metrics::kStoreWritesTotal, static_cast<double>(store_writes_));
  m.add(config_metrics::kStoreWriteErrorsTotal, static_cast<double>(store_write_errors_));
  m.add(config_metrics::kStoreWriteSecondsTotal, store_total_ms_ / 1000);
  m.add(config_metrics::kStoreLastWriteSeconds, store_last_ms_ / 1000);
  m.add(config_metrics::kHeartbeatsTotal, static_cast<double>(controller_.heartbeats()));
  // Shown from the first heartbeat on (a config server that has handled none has no lag to tell).
  if (controller_.heartbeat_lag().count() > 0) {
    m.histogram(config_metrics::kHeartbeatLagSeconds, controller_.heartbeat_lag());
  }
  if (hooks_.metrics) hooks_.metrics(m);
  m.add(config_metrics::kAuthRefusedTotal, static_cast<double>(auth_refused_));
  int up[2] = {0, 0}, down[2] = {0, 0}, lagging[2] = {0, 0};
  for (const auto& [key, n] : controller_.registry().nodes()) {
    const int role = n.is_hash() ? 0 : 1;
    (!n.up ? down : n.lagging ? lagging : up)[role] += 1;
    const MetricsText::Labels who{{"role", to_string(n.role)}, {"name", n.name}};
    m.add(config_metrics::kNodeVersion, static_cast<double>(n.version), who);
    m.add(config_metrics::kNodeUp, n.up ? 1 : 0, who);
    m.add(config_metrics::kNodeLagging, n.up && n.lagging ? 1 : 0, who);
    if (const auto* r = n.stats.if_contains("records"); r && r->is_number()) {
      m.add(config_metrics::kNodeRecords, r->to_number<double>(), who);
    }
    if (n.is_hash()) {
      m.add(config_metrics::kReplicationLag,
            static_cast<double>(controller_.replication_lag(n.name)), {{"name", n.name}});
    }
  }
  // Refills in progress (replicas), and how far along.
  for (const json::value& r : controller_.refills().json(monotonic_ns())) {
    const json::object& o = r.as_object();
    const MetricsText::Labels who{{"name", json::value_to<std::string>(o.at("server"))}};
    m.add(config_metrics::kRefillProgress, o.at("progress").to_number<double>(), who);
    m.add(config_metrics::kRefillRecordsSent, o.at("records_sent").to_number<double>(), who);
  }
  for (int role = 0; role < 2; ++role) {
    const char* name = to_string(role == 0 ? Role::kHash : Role::kLogin);
    m.add(config_metrics::kNodes, up[role], {{"role", name}, {"state", "up"}});
    m.add(config_metrics::kNodes, down[role], {{"role", name}, {"state", "down"}});
    m.add(config_metrics::kNodes, lagging[role], {{"role", name}, {"state", "lagging"}});
  }
  m.add(config_metrics::kRejectedAcksTotal,
        static_cast<double>(controller_.registry().rejected(cluster::VersionSource::kAck)));
  for (const auto from : {cluster::VersionSource::kRegister, cluster::VersionSource::kHeartbeat}) {
    m.add(config_metrics::kRejectedVersionsTotal,
          static_cast<double>(controller_.registry().rejected(from)),
          {{"message", cluster::version_source_name(from)}});
  }
  m.add(config_metrics::kRegistrationsRefusedTotal,
        static_cast<double>(controller_.refused_name_held()));
  if (const std::optional<double> ms = controller_.registry().convergence_ms()) {
    m.add(config_metrics::kConvergenceSeconds, *ms / 1000.0);
  }
  m.add(config_metrics::kConverged, controller_.converged() ? 1 : 0);
  m.add(config_metrics::kPendingPurge, controller_.pending().empty() ? 0 : 1);
  m.add(config_metrics::kPendingPurges, static_cast<double>(controller_.pending().size()));
  // Each hash server's latest stream report, one metric after the other.
  struct StreamMetric {
    const MetricDef& metric;
    double (*value)(const control::StreamReport&);
  };
  static constexpr StreamMetric kStreamMetrics[] = {
      {config_metrics::kStreamRunning,
       [](const control::StreamReport& r) { return r.state == StreamState::kRunning ? 1.0 : 0.0; }},
      {config_metrics::kStreamRecordsSent,
       [](const control::StreamReport& r) { return static_cast<double>(r.sent); }},
      {config_metrics::kStreamRecordsPerSecond,
       [](const control::StreamReport& r) { return static_cast<double>(r.rate); }},
      {config_metrics::kStreamEtaSeconds,
       [](const control::StreamReport& r) { return static_cast<double>(r.eta_ms) / 1000.0; }},
      {config_metrics::kStreamScannedRatio,
       [](const control::StreamReport& r) {
         if (r.state == StreamState::kDone) return 1.0;
         return r.total == 0
                    ? 0.0
                    : std::min(1.0, static_cast<double>(r.scanned) / static_cast<double>(r.total));
       }},
  };
  for (const StreamMetric& metric : kStreamMetrics) {
    for (const auto& [key, n] : controller_.registry().nodes()) {
      if (n.is_hash() && n.stream) {
        m.add(metric.metric, metric.value(*n.stream), {{"name", n.name}});
      }
    }
  }
  return m.str();
}

// ---------------------------------------------------------------------------------------------

}  // namespace imhash
