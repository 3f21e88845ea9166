// Every figure the hash server's /metrics shows, declared once: its name, its type and its help
// (common/codec/metric_def.h; pelikan declares its metrics the same way, in one table beside the
// module). hash_server_metrics.cpp fills in the values, in this order; imhash_table_version, the
// config link's and the process's figures are common to every node (common/links/node_control.h,
// common/runtime/process_metrics.cpp). docs/operations.md and the alert rules (deploy/prometheus/)
// use these names.
#pragma once

#include "common/codec/metric_def.h"

namespace imhash::hash_metrics {

using Type = MetricDef::Type;

// For the whole server.
inline constexpr MetricDef kAuthRefusedTotal{
    "imhash_hash_auth_refused_total", Type::kCounter,
    "handshakes refused because the peer did not prove the cluster key"};
inline constexpr MetricDef kTlsRefusedTotal{
    "imhash_hash_tls_refused_total", Type::kCounter,
    "handshakes refused because one side wanted TLS and the other did not"};
inline constexpr MetricDef kConnectionsRefusedTotal{
    "imhash_hash_connections_refused_total", Type::kCounter,
    "connections closed at accept: over --max-connections (total) or --max-connections-per-source "
    "(source)"};
inline constexpr MetricDef kOpenConnections{"imhash_hash_open_connections", Type::kGauge,
                                            "TCP connections held, handshaking or bound"};
inline constexpr MetricDef kStreamBatchesRetriedTotal{
    "imhash_stream_batches_retried_total", Type::kCounter,
    "IMPORT batches of the outbound stream sent again (a timeout, a lost link)"};
inline constexpr MetricDef kStreamBatchesQueued{
    "imhash_stream_batches_queued", Type::kGauge,
    "IMPORT batches waiting to be sent or acknowledged"};
inline constexpr MetricDef kStreamRecordsPerSecond{
    "imhash_stream_records_per_second", Type::kGauge,
    "records per second the outbound stream delivers"};
inline constexpr MetricDef kFilling{
    "imhash_hash_filling", Type::kGauge,
    "1 while the other replicas refill this server (it restarted empty): lookups are answered "
    "NOT_READY, so another copy is read"};

// Per shard (label "shard").
inline constexpr MetricDef kRecords{"imhash_hash_records", Type::kGauge, "records held, per shard"};
inline constexpr MetricDef kMemoryBytes{"imhash_hash_memory_bytes", Type::kGauge,
                                        "bytes of the shard's table and address pool"};
inline constexpr MetricDef kConnections{"imhash_hash_connections", Type::kGauge,
                                        "login server links bound to the shard"};
inline constexpr MetricDef kRequestsTotal{"imhash_hash_requests_total", Type::kCounter,
                                          "requests answered, by operation"};
inline constexpr MetricDef kTlsConnections{"imhash_hash_tls_connections", Type::kGauge,
                                           "login server links bound to the shard over TLS"};
inline constexpr MetricDef kTlsHandshakeFailuresTotal{
    "imhash_hash_tls_handshake_failures_total", Type::kCounter,
    "TLS handshakes that failed (no certificate, one another CA signed, not TLS 1.3) or timed out"};
inline constexpr MetricDef kMovedTotal{"imhash_hash_moved_total", Type::kCounter,
                                       "requests answered MOVED (sender's table was older)"};
inline constexpr MetricDef kBadFramesTotal{"imhash_hash_bad_frames_total", Type::kCounter,
                                           "connections closed for malformed frames"};
inline constexpr MetricDef kPurgedTotal{"imhash_hash_purged_total", Type::kCounter,
                                        "records deleted by purges"};
inline constexpr MetricDef kLongestTurnSeconds{
    "imhash_hash_longest_turn_seconds", Type::kGauge,
    "longest event-loop turn of the shard since start-up (a batch of requests or a purge step, "
    "with any store growth inside it)"};
inline constexpr MetricDef kTurnSeconds{"imhash_hash_turn_seconds", Type::kHistogram,
                                        "event-loop turns of the shard, by duration"};
inline constexpr MetricDef kStreamRunning{"imhash_stream_running", Type::kGauge,
                                          "1 while the shard's outbound stream runs"};
inline constexpr MetricDef kStreamVersion{
    "imhash_stream_version", Type::kGauge,
    "table version the shard's current or last stream ran against"};
inline constexpr MetricDef kStreamScannedSlots{"imhash_stream_scanned_slots", Type::kGauge,
                                               "slots the current or last stream examined"};
inline constexpr MetricDef kStreamTotalSlots{"imhash_stream_total_slots", Type::kGauge,
                                             "slots the current or last stream has to examine"};
inline constexpr MetricDef kStreamRecordsSent{
    "imhash_stream_records_sent", Type::kGauge,
    "records of the current or last stream their new owners acknowledged"};
inline constexpr MetricDef kImportRecordsTotal{
    "imhash_import_records_total", Type::kCounter,
    "streamed records received: stored, or skipped because the shard held a newer one, the id was "
    "deleted during the move, it belongs to another shard, or a table at least as new as the "
    "batch's places it on another server"};
inline constexpr MetricDef kRepairsSkippedDeletedTotal{
    "imhash_repairs_skipped_deleted_total", Type::kCounter,
    "read repairs not stored because the id was deleted during a move"};
inline constexpr MetricDef kWritesSupersededTotal{
    "imhash_writes_superseded_total", Type::kCounter,
    "writes not applied because a write of the same id made after them had been applied already "
    "(they arrived late: held for this server, or delayed on another connection)"};
inline constexpr MetricDef kTombstones{"imhash_tombstones", Type::kGauge,
                                       "deletes remembered while ids may still be moving"};
inline constexpr MetricDef kNotReadyTotal{
    "imhash_hash_not_ready_total", Type::kCounter,
    "lookups answered NOT_READY while the server was being refilled"};
inline constexpr MetricDef kTombstonesDroppedTotal{
    "imhash_tombstones_dropped_total", Type::kCounter,
    "deletes not remembered during a move because the tombstone set was full"};
inline constexpr MetricDef kPurgeRunning{"imhash_purge_running", Type::kGauge,
                                         "1 while a purge runs on the shard"};
inline constexpr MetricDef kPurgeScannedSlots{"imhash_purge_scanned_slots", Type::kGauge,
                                              "slots the current or last purge examined"};
inline constexpr MetricDef kPurgeTotalSlots{"imhash_purge_total_slots", Type::kGauge,
                                            "slots the current or last purge has to examine"};
inline constexpr MetricDef kPurgeDeleted{"imhash_purge_deleted", Type::kGauge,
                                         "records the current or last purge deleted"};

}  // namespace imhash::hash_metrics
