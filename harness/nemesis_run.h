// run_nemesis: one whole run of issue 33, in one place for the integration test (a short seeded
// run in CI) and the benchmark driver (long runs): a NemesisCluster, clients on both client hosts
// through both login servers recording a history (udp_sim --history, each write's endpoint unique
// to it), the Nemesis for the run's length, then the history checked against the fault windows
// (tools/nemesis/history_checker.h). Every file of the run — the histories, the fault log, the
// windows, each daemon's log — stays in the run's directory (harness/run_logs.h).
// Used from the test's thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/nemesis.h"
#include "harness/nemesis_cluster.h"
#include "harness/udp_sim_run.h"
#include "tools/nemesis/history_checker.h"

namespace imhash::test {

struct NemesisRunOptions {
  uint64_t seed = 1;
  std::chrono::milliseconds length{std::chrono::seconds(60)};
  // Per udp_sim (one per client host and login server): its users and its offered rate.
  uint64_t users_per_client = 2000;
  int rate_per_client = 400;
  NemesisClusterOptions cluster{};
  NemesisOptions nemesis{};  // its seed is the run's
};

struct NemesisRunResult {
  uint64_t seed = 0;
  std::vector<FaultRecord> faults;
  std::array<uint64_t, kFaultKinds> counts{};  // faults that took effect, by kind
  std::vector<UdpSimSummary> clients;
  history::Report report;
  std::string dir;  // where the run's files are
  std::string log_file, windows_file;
  std::vector<std::string> history_files;
};

// Throws HostsUnavailable where this machine cannot make hosts; std::runtime_error when a step
// of the run fails (the cluster does not start, a client's history cannot be read).
NemesisRunResult run_nemesis(const NemesisRunOptions& options);

}  // namespace imhash::test
