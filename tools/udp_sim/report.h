// What udp_sim prints: a progress line every second, the final summary (human-readable, or one JSON
// object with --json), and the exit status the run ends with.
//
// Progress line (stdout, or stderr with --json):
//   [   3.0s] sent 51234/s done 51230/s p50 310us p99 905us p999 2011us in_flight 64
//   NOT_FOUND=212 TIMEOUT=0 UNAVAILABLE=0 no_reply=0 [other statuses, late=, malformed=,
//   amplified=, verify_failed= when not zero]          (one line; rates over the last interval)
//
// JSON summary fields (counts are totals over the run):
//   target, users, first_user, sockets, mode ("closed"|"open"), window, rate, mix, seed,
//   timeout_ms, retries, observed, echo, storm, lookup_only, history (the --history file, "" for
//   none), history_client, history_records (requests written to it, warm-up included), warmup_s
//   (left out of every figure below), duration_s (asked, measured), elapsed_s (measured part),
//   interrupted (SIGINT/SIGTERM), requests (distinct requests sent), retries_sent (re-sends),
//   replies (requests answered), no_reply (every try timed out), abandoned (unanswered at the
//   end), unsent (open loop: due but never sent), requests_per_s (replies / elapsed_s),
//   status {OK, NOT_FOUND, BAD_REQUEST, UNAVAILABLE, TIMEOUT, UNAUTHORIZED, RATE_LIMITED,
//           UNSUPPORTED_VERSION},
//   ops {LOGIN|HEARTBEAT|LOOKUP|LOGOUT: {requests, retries, replies, no_reply, abandoned,
//        status {...}, latency_us {...}}},
//   latency_us {count, min, mean, p50, p90, p99, p999, max},
//   late_replies, mismatched_replies, malformed_replies, amplified_replies, refused, send_errors,
//   recv_errors,
//   verify {enabled, result ("off"|"pass"|"fail"|"nothing_verified"), verified_ok, verify_failed,
//           unjudged, echo_checked, failures [{user, op, expected, got}] (the first 10)},
//   exit_code.
//
// Exit status: 1 when --verify found a wrong answer, or any amplified, mismatched or malformed
// reply; else 69 when requests were sent and not one was answered; else 2 when --verify could not
// judge a single LOOKUP; else 0.
//
// Not thread-safe: the driver's thread (progress) and then main() (summary).
#pragma once

#include <boost/json/object.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/udp_sim/sim_config.h"
#include "tools/udp_sim/stats.h"
#include "tools/udp_sim/user_model.h"

namespace imhash::sim {

int exit_code_for(bool verify, const Counters& c, const VerifyCounts& v);
// "off", "pass", "fail" or "nothing_verified".
const char* verify_result(bool verify, const Counters& c, const VerifyCounts& v);

// The progress line for an interval of `interval_s` seconds ending `elapsed_s` after the start,
// from the counters at its end and at its start and the latencies recorded in it. No newline.
std::string progress_line(double elapsed_s, double interval_s, const Counters& now,
                          const Counters& before, const LatencyHistogram& interval,
                          uint32_t in_flight, bool verify, const VerifyCounts& v);

// The --csv time series: a header line, then one row per progress line, with the same figures:
//   elapsed_s,sent_per_s,done_per_s,p50_us,p99_us,p999_us,in_flight,NOT_FOUND,BAD_REQUEST,
//   UNAVAILABLE,TIMEOUT,UNAUTHORIZED,RATE_LIMITED,UNSUPPORTED_VERSION,no_reply,verify_failed
// (statuses and no_reply: requests that ended so in the interval; verify_failed: the running
// total). No newline.
std::string csv_header();
std::string csv_row(double elapsed_s, double interval_s, const Counters& now,
                    const Counters& before, const LatencyHistogram& interval, uint32_t in_flight,
                    const VerifyCounts& v);

class Reporter {
 public:
  // `csv`, when not null, receives csv_header() at once and a csv_row() with every progress line.
  Reporter(bool verify, std::FILE* out, std::FILE* csv = nullptr);

  // Prints the line for the interval since the previous call, then folds lat.interval into
  // lat.total.
  void progress(double elapsed_s, const Counters& c, const VerifyCounts& v, Latencies& lat,
                uint32_t in_flight);

 private:
  bool verify_;
  std::FILE* out_;
  std::FILE* csv_;
  Counters last_;
  double last_elapsed_ = 0;
};

struct RunSummary {
  const SimConfig& config;
  std::string target;  // resolved address
  const Counters& counters;
  const Latencies& latencies;  // with the last interval folded in
  const VerifyCounts& verify;
  const std::vector<VerifyFailure>& failures;
  double elapsed_s = 0;
  bool interrupted = false;
  uint64_t history_records = 0;  // requests written to --history
};

std::string summary_text(const RunSummary& s);
boost::json::object summary_json(const RunSummary& s);

}  // namespace imhash::sim
