// The history checker, proved on the product with a known defect put back (issue 33,
// docs/reliability.md "The checker, proved"): a short run of one fault with udp_sim recording
// its history, once as built and once with the rule that covers that fault switched off
// (IMHASH_DEFECTS, common/runtime/defects.h). The checker must find nothing in the first run and
// flag the second: a checker that passes both proves nothing.
//
//   no-hints       with 2 copies, a member frozen past DOWN: the writes it could not take are
//                  held and replayed before it is read again. Without: reads there are stale.
//   no-tombstones  with 1 copy, during a range move, the old owner frozen: LOGOUTs cannot delete
//                  its old copy, and the new owner remembers them. Without: a lookup falls back
//                  to the old copy and the user is back. (The ids hash1 still owns are
//                  unavailable while it is frozen, by design with one copy: not checked here.)
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness/config_cluster.h"
#include "harness/run_logs.h"
#include "harness/udp_sim_run.h"
#include "harness/wait_until.h"
#include "tools/nemesis/history_checker.h"

using namespace imhash;
using namespace imhash::test;
using namespace std::chrono_literals;

namespace {

// IMHASH_DEFECTS for the daemons started while it lives.
class DefectsInEnvironment {
 public:
  explicit DefectsInEnvironment(const std::string& defects) {
    if (!defects.empty()) ::setenv("IMHASH_DEFECTS", defects.c_str(), 1);
  }
  ~DefectsInEnvironment() { ::unsetenv("IMHASH_DEFECTS"); }
  DefectsInEnvironment(const DefectsInEnvironment&) = delete;
  DefectsInEnvironment& operator=(const DefectsInEnvironment&) = delete;
};

// A recorded load on users 1..2000 for `seconds`, as the nemesis's clients make it.
std::unique_ptr<UdpSim> recorded_load(uint16_t udp, const std::string& history, int seconds) {
  return std::make_unique<UdpSim>(
      std::vector<std::string>{"--target",         "127.0.0.1:" + std::to_string(udp),
                               "--users",          "2000",
                               "--rate",           "2000",
                               "--duration",       std::to_string(seconds),
                               "--timeout-ms",     "300",
                               "--retries",        "3",
                               "--seed",           "5",
                               "--history",        history,
                               "--history-client", "0",
                               "--log-level",      "warn"});
}

history::Report checked(UdpSim& sim, const std::string& path) {
  sim.wait();
  history::History h;
  if (const auto e = history::read_history_file(path, h)) FAIL(e->to_string());
  history::Report r = history::check(std::move(h), {}, history::CheckOptions{.examples = 2});
  MESSAGE(history::render_text(r));
  return r;
}

uint64_t outside(const history::Report& r, history::Rule rule) { return r.tally(rule).outside; }

// Two copies of every record, hash2 frozen for 2.5 s (past DOWN) under the load.
history::Report frozen_member(const std::string& defects) {
  DefectsInEnvironment env(defects);
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 1000, .initial_mode = "ring"});
  const uint16_t udp = c.start_serving(3);
  REQUIRE(c.imctl({"replicas", "2"}).exit_code == 0);
  REQUIRE(c.wait_converged(c.version(), 4));
  const std::string path = RunLogs::dir() + "/history" + (defects.empty() ? "" : "." + defects);
  auto sim = recorded_load(udp, path, 8);
  std::this_thread::sleep_for(1500ms);  // the fault's start and length, not waits
  ::kill(c.hash(2).pid(), SIGSTOP);
  std::this_thread::sleep_for(2500ms);
  ::kill(c.hash(2).pid(), SIGCONT);
  return checked(*sim, path);
}

// One copy; ids 1001-2000 moved from hash1 to hash2 (a 20 s grace period), then hash1 frozen for
// 3 s under the load.
history::Report frozen_old_owner(const std::string& defects) {
  DefectsInEnvironment env(defects);
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 20000});
  const uint16_t udp = c.start_serving(2);  // range mode: hash1 owns the ids the load uses
  const std::string path = RunLogs::dir() + "/history" + (defects.empty() ? "" : "." + defects);
  auto sim = recorded_load(udp, path, 10);
  std::this_thread::sleep_for(1500ms);
  REQUIRE(c.imctl({"assign", "1001-2000", "hash2"}).exit_code == 0);
  REQUIRE(wait_until([&] { return c.held(2, 1001, 2000) > 500; }, 10s, 50ms));
  ::kill(c.hash(1).pid(), SIGSTOP);
  std::this_thread::sleep_for(3000ms);
  ::kill(c.hash(1).pid(), SIGCONT);
  return checked(*sim, path);
}

}  // namespace

TEST_CASE("checker proof: held writes put back, a frozen member's reads are checked stale") {
  const history::Report as_built = frozen_member("");
  CHECK(outside(as_built, history::Rule::kStale) == 0);
  CHECK(outside(as_built, history::Rule::kWriteLost) == 0);
  CHECK(outside(as_built, history::Rule::kLogoutUndone) == 0);
  CHECK(as_built.judged_lookups > 1000);
  const history::Report defect = frozen_member("no-hints");
  CHECK(outside(defect, history::Rule::kStale) + outside(defect, history::Rule::kWriteLost) +
            outside(defect, history::Rule::kLogoutUndone) >
        0);
  CHECK_FALSE(defect.passed());
}

TEST_CASE("checker proof: tombstones put back, a logout undone by an old copy is checked") {
  const history::Report as_built = frozen_old_owner("");
  CHECK(outside(as_built, history::Rule::kLogoutUndone) == 0);
  CHECK(outside(as_built, history::Rule::kStale) == 0);
  CHECK(outside(as_built, history::Rule::kWriteLost) == 0);
  const history::Report defect = frozen_old_owner("no-tombstones");
  CHECK(outside(defect, history::Rule::kLogoutUndone) > 0);
  CHECK_FALSE(defect.passed());
}
