// udp_sim for the scenarios: runs it (to its end, or in the background while something else
// happens) and reads its `--json` summary. parse_sim_summary is the driver's ONE reader of that
// summary (the harness's udp_sim runner, harness/udp_sim_run.h, will take its place when it lands).
// Main thread only.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/child_process.h"

namespace imhash::bench {

// The figures of udp_sim's summary that the scenarios quote, with the whole object beside them.
struct SimSummary {
  boost::json::object json;   // as udp_sim printed it (ops, verify, status...: read what you need)
  double requests_per_s = 0;  // replies per second over the measured time
  uint64_t requests = 0, replies = 0, no_reply = 0, abandoned = 0;
  uint64_t ok = 0, not_found = 0;
  uint64_t errors = 0;  // requests that ended other than OK or NOT_FOUND (bench.sh's "errors")
  uint64_t p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  double elapsed_s = 0;
  int exit_code = 0;  // udp_sim's (1: --verify found a wrong answer)

  // The figures above as a JSON object (for Result::figures; units in the keys).
  boost::json::object figures() const;
};

// Reads udp_sim's --json summary; throws std::runtime_error on anything else.
SimSummary parse_sim_summary(std::string_view text);

// udp_sim started in the background: `args` are its flags (--json is added); its stderr (the
// per-second progress lines) goes to `progress_log`.
class SimRun {
 public:
  SimRun(const std::string& udp_sim, std::vector<std::string> args,
         const std::string& progress_log);
  // Waits (bounded by `timeout`) for its end and reads its summary; throws if it gave none.
  SimSummary finish(std::chrono::milliseconds timeout);
  // Waits (bounded) until it has printed `count` progress lines (a second of load each): "the
  // warm-up is over" without sleeping for it.
  void wait_progress(int count, std::chrono::milliseconds timeout);
  test::ChildProcess& process() { return *child_; }

 private:
  std::string progress_log_;
  std::unique_ptr<test::ChildProcess> child_;
};

// Runs udp_sim to its end: its own --duration (plus warm-up) bounds it; `slack` is how much
// longer it may take before it is killed and the run fails.
SimSummary run_sim(const std::string& udp_sim, std::vector<std::string> args,
                   const std::string& progress_log,
                   std::chrono::milliseconds slack = std::chrono::seconds(60));

// udp_sim's --csv time series (a header, then a row a second) as {columns: [...], rows: [[...]]},
// numbers where the cells are numbers: what a result carries for scripts/plot_result.
boost::json::object read_sim_csv(const std::string& path);

}  // namespace imhash::bench
