// A udp_sim load run in the background while a scenario does something beside it (a purge, a
// streaming move): started at construction with its per-second --csv series in the current
// directory, the moment its measured seconds have begun (an event: its first per-second row, not
// a guessed sleep), and its summary once it ends, through the harness's one reader of udp_sim's
// summary (harness/udp_sim_run.h). Main thread only.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "harness/udp_sim_run.h"

namespace imhash::bench {

class BackgroundSim {
 public:
  // Starts `udp_sim` with `args` plus --csv NAME.csv; its progress lines go to NAME.log.
  // `own_s`: its --warmup plus --duration, which bound the run with `slack` added.
  BackgroundSim(const std::string& udp_sim, std::vector<std::string> args, const std::string& name,
                double own_s, std::chrono::milliseconds slack = std::chrono::seconds(60));
  // Waits for its first per-second row: the load has run one measured second, past any
  // warm-up. Throws if none comes within the run's own seconds and `slack`.
  void wait_first_second();
  // Whether udp_sim still runs.
  bool running() { return sim_.process().running(); }
  // Its summary, once it has ended (bounded as the constructor says).
  test::UdpSimSummary wait();
  // Its per-second series so far (sim.h's read_sim_csv).
  boost::json::object series() const;
  const std::string& csv_path() const { return csv_; }

 private:
  std::string csv_;
  double own_s_;
  std::chrono::milliseconds slack_;
  test::UdpSim sim_;
};

}  // namespace imhash::bench
