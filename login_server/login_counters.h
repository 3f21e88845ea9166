// LoginCounters: every figure a login server counts, declared once (pelikan declares its metrics
// the same way, in one table beside the module). The table below gives each plain counter its
// field, its name in the heartbeat stats (the field's name) and its Prometheus name and help; the
// labelled families (replies by status, drops by reason, the latency histogram, links by state)
// and the server's other figures follow it in login_metrics. Both /metrics and the heartbeat
// stats are generated from these declarations; imhash_table_version and the config link's figures
// are every node's (node_metrics in common/links/node_control.h).
//
// A plain value: each worker thread owns one; the main thread sums sampled copies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "common/codec/histogram.h"
#include "common/codec/metric_def.h"
#include "login_server/request_plan.h"

namespace imhash {

// X(field, prometheus name, help)
#define IMHASH_LOGIN_COUNTERS(X)                                                                   \
  X(received, "imhash_login_datagrams_total", "datagrams received from clients")                   \
  X(forwarded, "imhash_login_forwarded_total", "requests sent to hash servers")                    \
  X(moved_retries, "imhash_login_moved_retries_total", "requests retried after MOVED")             \
  X(fallback_reads, "imhash_login_fallback_reads_total", "lookups retried at an earlier owner")    \
  X(fallback_hits, "imhash_login_fallback_hits_total", "fallback reads that found the user")       \
  X(read_repairs, "imhash_login_read_repairs_total",                                               \
    "records copied to their new owner or its replicas")                                           \
  X(replica_writes, "imhash_login_replica_writes_total", "copies of writes sent to replicas")      \
  X(replica_write_failures, "imhash_login_replica_write_failures_total",                           \
    "copies of writes to replicas that failed or were refused")                                    \
  X(replica_reads, "imhash_login_replica_reads_total",                                             \
    "lookups sent to a replica because the members before it failed or were out of reach")         \
  X(hedged, "imhash_login_hedged_total",                                                           \
    "requests sent on to the next replica because their member had not answered within "           \
    "--hedge-ms")                                                                                  \
  X(writes_lost_after_timeout, "imhash_login_writes_lost_after_timeout_total",                     \
    "writes that timed out and then went with their link unanswered, held for their member again") \
  X(hints_queued, "imhash_login_hints_queued_total",                                               \
    "writes held for a replica whose link was down, to be sent in order once it is back")          \
  X(hints_replayed, "imhash_login_hints_replayed_total", "held writes sent to their replica")      \
  X(hints_dropped, "imhash_login_hints_dropped_total",                                             \
    "writes not held for a replica out of reach: its queue was full or it left the table")         \
  X(send_failures, "imhash_login_send_failures_total", "replies the kernel refused to send")

namespace login_metrics {

using Type = MetricDef::Type;

inline constexpr MetricDef kRepliesTotal{"imhash_login_replies_total", Type::kCounter,
                                         "replies sent to clients, by status"};
inline constexpr MetricDef kDroppedTotal{"imhash_login_dropped_total", Type::kCounter,
                                         "datagrams dropped without a reply, by reason"};
inline constexpr MetricDef kLinks{"imhash_login_links", Type::kGauge,
                                  "links to hash server shards, by state"};
inline constexpr MetricDef kHeldWrites{
    "imhash_login_held_writes", Type::kGauge,
    "writes held for a hash server whose links cannot take them (replicas), not yet applied there"};
inline constexpr MetricDef kLinkRefusedTotal{
    "imhash_login_link_refused_total", Type::kCounter,
    "link handshakes given up because the hash server did not prove the cluster key or its TLS "
    "failed"};
inline constexpr MetricDef kRequestSeconds{
    "imhash_login_request_seconds", Type::kHistogram,
    "time from a client's datagram to its reply, for requests sent to hash servers"};

}  // namespace login_metrics

struct LoginCounters {
#define IMHASH_LOGIN_FIELD(field, metric, help) uint64_t field = 0;
  IMHASH_LOGIN_COUNTERS(IMHASH_LOGIN_FIELD)
#undef IMHASH_LOGIN_FIELD

  // "imhash_login_dropped_total" by reason; stats "dropped_<reason>".
  uint64_t dropped[static_cast<size_t>(DropReason::kCount)] = {};
  // "imhash_login_replies_total" by status; stats "replies_<STATUS>".
  static constexpr size_t kStatuses = 8;
  uint64_t replies_by_status[kStatuses] = {};

  // "imhash_login_request_seconds": time from receiving a forwarded request to queueing its reply
  // (not for PING and errors answered at once), in seconds.
  static constexpr std::array<double, 11> kLatencyBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25};
  Histogram<kLatencyBounds> latency;

  // "imhash_login_links" by state: filled when a worker is sampled.
  uint32_t links_up = 0;
  uint32_t links_down = 0;

  void record_latency(int64_t nanoseconds) {
    latency.record(static_cast<double>(nanoseconds) / 1e9);
  }

  // Adds another worker's counters (a server's figures are the sum of its workers').
  LoginCounters& operator+=(const LoginCounters& o) {
#define IMHASH_LOGIN_ADD(field, metric, help) field += o.field;
    IMHASH_LOGIN_COUNTERS(IMHASH_LOGIN_ADD)
#undef IMHASH_LOGIN_ADD
    for (size_t i = 0; i < std::size(dropped); ++i) dropped[i] += o.dropped[i];
    for (size_t i = 0; i < kStatuses; ++i) replies_by_status[i] += o.replies_by_status[i];
    latency += o.latency;
    links_up += o.links_up;
    links_down += o.links_down;
    return *this;
  }
};

}  // namespace imhash
