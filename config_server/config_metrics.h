// Every figure the config server's /metrics shows, declared once: its name, its type and its help
// (pelikan declares its metrics the same way, in one table beside the module; the hash and login
// servers' are in hash_server/hash_metrics.h and login_server/login_counters.h).
// config_service_metrics.cpp, control_plane.cpp and node_listener.cpp fill in the values;
// docs/operations.md and the alert rules (deploy/prometheus/) use these names.
#pragma once

#include "common/codec/metric_def.h"

namespace imhash::config_metrics {

using Type = MetricDef::Type;

inline constexpr MetricDef kTableVersion{"imhash_config_table_version", Type::kGauge,
                                         "current routing table version"};
inline constexpr MetricDef kLeader{"imhash_config_leader", Type::kGauge,
                                   "1 while this config server leads (always, alone on a file "
                                   "store); 0 as a standby"};
inline constexpr MetricDef kStoreWritesTotal{
    "imhash_config_store_writes_total", Type::kCounter,
    "writes of the state (a table change, the pending purges) to "
    "its store"};
inline constexpr MetricDef kStoreWriteErrorsTotal{
    "imhash_config_store_write_errors_total", Type::kCounter, "writes of the state that failed"};
inline constexpr MetricDef kStoreWriteSecondsTotal{"imhash_config_store_write_seconds_total",
                                                   Type::kCounter, "time spent writing the state"};
inline constexpr MetricDef kStoreLastWriteSeconds{"imhash_config_store_last_write_seconds",
                                                  Type::kGauge,
                                                  "how long the latest write of the state took"};
inline constexpr MetricDef kHeartbeatsTotal{"imhash_config_heartbeats_total", Type::kCounter,
                                            "heartbeats handled"};
inline constexpr MetricDef kHeartbeatLagSeconds{
    "imhash_config_heartbeat_lag_seconds", Type::kHistogram,
    "from a heartbeat's sending (the node's wall clock) to its "
    "handling here"};
inline constexpr MetricDef kAuthRefusedTotal{
    "imhash_config_auth_refused_total", Type::kCounter,
    "node links refused because the node did not prove the cluster "
    "key"};
inline constexpr MetricDef kNodeVersion{"imhash_config_node_version", Type::kGauge,
                                        "table version each node acknowledged"};
inline constexpr MetricDef kNodeUp{"imhash_config_node_up", Type::kGauge,
                                   "1 while the node heartbeats"};
inline constexpr MetricDef kNodeLagging{"imhash_config_node_lagging", Type::kGauge,
                                        "1 while the node heartbeats but has not acknowledged the "
                                        "current version within the DOWN window after its push"};
inline constexpr MetricDef kNodeRecords{"imhash_config_node_records", Type::kGauge,
                                        "records a hash server holds (from its heartbeat)"};
inline constexpr MetricDef kReplicationLag{
    "imhash_config_replication_lag", Type::kGauge,
    "writes the login servers hold for a hash server because its "
    "links cannot take them: not applied there yet (replicas; from "
    "the login servers' heartbeats)"};
inline constexpr MetricDef kRefillProgress{
    "imhash_config_refill_progress", Type::kGauge,
    "a hash server being refilled from its peers: the mean share of "
    "their slots their streams have examined (0..1)"};
inline constexpr MetricDef kRefillRecordsSent{
    "imhash_config_refill_records_sent", Type::kGauge,
    "records the peers of a hash server being refilled have had "
    "acknowledged by it"};
inline constexpr MetricDef kNodes{"imhash_config_nodes", Type::kGauge, "nodes by role and state"};
inline constexpr MetricDef kRejectedAcksTotal{
    "imhash_config_rejected_acks_total", Type::kCounter,
    "acks of a version above the latest pushed: rejected, not "
    "applied"};
inline constexpr MetricDef kRejectedVersionsTotal{
    "imhash_config_rejected_versions_total", Type::kCounter,
    "registers and heartbeats naming a version above the latest "
    "pushed: not trusted for convergence"};
inline constexpr MetricDef kRegistrationsRefusedTotal{
    "imhash_config_registrations_refused_total", Type::kCounter,
    "registrations refused because a live link holds the name"};
inline constexpr MetricDef kConvergenceSeconds{
    "imhash_config_convergence_seconds", Type::kGauge,
    "time the last table version took to reach every node that is "
    "up and not lagging"};
inline constexpr MetricDef kConverged{
    "imhash_config_converged", Type::kGauge,
    "1 when every node that is up and not lagging runs the current "
    "table version (imctl status: converged)"};
inline constexpr MetricDef kPendingPurge{"imhash_config_pending_purge", Type::kGauge,
                                         "1 while any automatic purge is pending"};
inline constexpr MetricDef kPendingPurges{
    "imhash_config_pending_purges", Type::kGauge,
    "automatic purges pending (one per hash server that may hold "
    "old copies)"};
inline constexpr MetricDef kEtcdRequestsTotal{
    "imhash_config_etcd_requests_total", Type::kCounter,
    "requests to etcd (state writes and reads, the lease, the "
    "election)"};
inline constexpr MetricDef kEtcdRequestFailuresTotal{"imhash_config_etcd_request_failures_total",
                                                     Type::kCounter,
                                                     "requests to etcd no member answered"};
inline constexpr MetricDef kEtcdRequestSecondsTotal{
    "imhash_config_etcd_request_seconds_total", Type::kCounter, "time spent in requests to etcd"};
inline constexpr MetricDef kEtcdLastRequestSeconds{"imhash_config_etcd_last_request_seconds",
                                                   Type::kGauge,
                                                   "how long the latest request to etcd took"};
inline constexpr MetricDef kElectionsWonTotal{"imhash_config_elections_won_total", Type::kCounter,
                                              "times this config server became the leader"};
inline constexpr MetricDef kStandbys{"imhash_config_standbys", Type::kGauge,
                                     "config servers standing by, as the latest round saw"};
inline constexpr MetricDef kNodeLinksOpen{"imhash_config_node_links_open", Type::kGauge,
                                          "node links open (registered or not)"};
inline constexpr MetricDef kNodeLinksRefusedTotal{
    "imhash_config_node_links_refused_total", Type::kCounter,
    "node connections closed at once: over a connection cap"};
inline constexpr MetricDef kNodeLinksClosedTotal{
    "imhash_config_node_links_closed_total", Type::kCounter,
    "node links the config server closed: no register in time, "
    "idle, a malformed or oversize message"};
inline constexpr MetricDef kStreamRunning{"imhash_config_stream_running", Type::kGauge,
                                          "1 while the hash server's outbound stream runs"};
inline constexpr MetricDef kStreamRecordsSent{
    "imhash_config_stream_records_sent", Type::kGauge,
    "records the hash server's latest stream has had acknowledged "
    "by their new owners"};
inline constexpr MetricDef kStreamRecordsPerSecond{"imhash_config_stream_records_per_second",
                                                   Type::kGauge,
                                                   "the stream's rate over the last second or so"};
inline constexpr MetricDef kStreamEtaSeconds{
    "imhash_config_stream_eta_seconds", Type::kGauge,
    "estimated time until the stream is done (0 unless running)"};
inline constexpr MetricDef kStreamScannedRatio{
    "imhash_config_stream_scanned_ratio", Type::kGauge,
    "share of the hash server's slots its stream has examined (1 "
    "when done)"};

}  // namespace imhash::config_metrics
