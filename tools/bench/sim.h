// udp_sim for the scenarios, on the harness's runner and its one reader of udp_sim's --json
// summary (harness/udp_sim_run.h): run it to its end with a bound, the figures the scenarios
// quote, and its --csv time series for a result. Main thread only.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/udp_sim_run.h"

namespace imhash::bench {

using test::UdpSimSummary;

// Requests that ended other than OK or NOT_FOUND (what bench.sh called "errors").
uint64_t errors_of(const UdpSimSummary& s);

// The figures every scenario quotes from a summary (units in the keys): requests_per_s,
// requests, errors, no_reply, p50_us, p99_us, p999_us, max_us, elapsed_s.
boost::json::object sim_figures(const UdpSimSummary& s);

// Runs udp_sim (`udp_sim`: the binary of the build under test) with `args` to its end; its
// progress lines go to NAME.log in the current directory. Its own --duration (plus --warmup)
// bounds it; `slack` is how much longer it may take before the run fails.
UdpSimSummary run_sim(const std::string& udp_sim, std::vector<std::string> args,
                      const std::string& name,
                      std::chrono::milliseconds slack = std::chrono::seconds(60));

// udp_sim's --csv time series (a header, then a row a second) as {columns: [...], rows: [[...]]},
// numbers where the cells are numbers: what a result carries for scripts/plot_result.
boost::json::object read_sim_csv(const std::string& path);

}  // namespace imhash::bench
