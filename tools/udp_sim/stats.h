// Counters and latency histograms of one udp_sim run: what the LoadDriver counts and the Reporter
// prints. Plain values, no locks: the driver's thread writes them and hands them to the Reporter on
// the same thread.
#pragma once

#include <array>
#include <cstdint>

#include "common/codec/client_protocol.h"
#include "tools/udp_sim/latency_histogram.h"

namespace imhash::sim {

// The operations udp_sim sends, indexed 0..3 (PING is not part of a load).
inline constexpr size_t kOpCount = 4;
inline constexpr std::array<client::Op, kOpCount> kOps = {
    client::Op::kLogin, client::Op::kHeartbeat, client::Op::kLookup, client::Op::kLogout};
inline constexpr size_t op_index(client::Op op) { return static_cast<size_t>(op) - 1; }

inline constexpr size_t kStatusCount = 8;  // 0 OK .. 7 UNSUPPORTED_VERSION

// How the requests of one operation ended. Every request ends exactly once:
// requests = replies + no_reply + abandoned (once the run is over).
struct OpCounters {
  uint64_t requests = 0;  // distinct requests sent (first tries)
  uint64_t retries = 0;   // re-sends of a request, same request_id, after a try timed out
  std::array<uint64_t, kStatusCount> status{};  // answered requests, by status
  uint64_t no_reply = 0;                        // every try timed out
  uint64_t abandoned = 0;                       // still unanswered when the run ended

  uint64_t replies() const {
    uint64_t n = 0;
    for (uint64_t s : status) n += s;
    return n;
  }
};

struct Counters {
  std::array<OpCounters, kOpCount> ops{};
  // Datagrams that did not answer a request we were waiting for.
  uint64_t late_replies = 0;        // request_id of a request already answered or given up
  uint64_t mismatched_replies = 0;  // request_id in flight, but another user_id or op echoed
  uint64_t malformed_replies = 0;   // undecodable, or an OK lacking a TLV that §1 promises
  uint64_t amplified_replies = 0;   // larger than the request (a protocol violation)
  uint64_t refused = 0;             // ICMP port unreachable reported on a socket
  uint64_t send_errors = 0;         // datagrams the kernel would not send (they time out)
  uint64_t recv_errors = 0;
  uint64_t unsent = 0;  // open loop: requests due by the end that could not be sent in time

  uint64_t total(uint64_t OpCounters::*field) const {
    uint64_t n = 0;
    for (const auto& o : ops) n += o.*field;
    return n;
  }
  uint64_t requests() const { return total(&OpCounters::requests); }
  uint64_t retries() const { return total(&OpCounters::retries); }
  uint64_t no_reply() const { return total(&OpCounters::no_reply); }
  uint64_t abandoned() const { return total(&OpCounters::abandoned); }
  uint64_t replies() const {
    uint64_t n = 0;
    for (const auto& o : ops) n += o.replies();
    return n;
  }
  uint64_t status(client::Status s) const {
    uint64_t n = 0;
    for (const auto& o : ops) n += o.status[static_cast<size_t>(s)];
    return n;
  }
};

// Latency of answered requests, from the scheduled send time (open loop) or the first send
// (closed loop) to the reply, retries included.
struct Latencies {
  LatencyHistogram total;                           // whole run, up to the last progress line
  LatencyHistogram interval;                        // since the last progress line
  std::array<LatencyHistogram, kOpCount> per_op{};  // whole run

  void record(client::Op op, uint64_t us) {
    interval.record(us);
    per_op[op_index(op)].record(us);
  }
  // Moves `interval` into `total` (after a progress line, and at the end).
  void fold_interval() {
    total.merge(interval);
    interval.reset();
  }
};

}  // namespace imhash::sim
