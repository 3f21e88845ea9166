// Scenario nemesis (issue 33): long runs under faults. Each run is harness/nemesis_run.h's: a
// cluster of hosts in network namespaces, the nemesis breaking it in four lanes at once, clients
// on two hosts through both login servers recording a history, and the checker judging every
// answer against it and the fault windows (docs/reliability.md). `runs` runs one after the other,
// seeds `seed`, `seed` + 1, ...; each run's files (histories, nemesis.log, nemesis.windows, every
// daemon's log) stay in WORK/run-SEED. Needs root.
//
// Figures: {runs: [{seed, minutes, faults: {KIND: n}, faults_total, faults_failed, ops:
// {OP: {STATUS: n}}, judged_lookups, anomalies: {RULE: {outside, inside: {WINDOW: n}}},
// passed, dir}], totals: {faults: {KIND: n}, faults_total, requests, anomalies_outside: {RULE:
// n}, runs_passed}}.
#include <boost/json.hpp>
#include <filesystem>

#include "harness/nemesis_run.h"
#include "harness/run_logs.h"
#include "tools/bench/bench.h"

namespace imhash::bench {
namespace {

void run_nemesis_scenario(Context& ctx) {
  Settings& s = ctx.settings;
  const int64_t first_seed = s.integer("seed", 1, "the first run's seed (run i: seed + i)");
  const int64_t runs = s.integer("runs", 1, "runs, one after the other");
  const double minutes = s.real("minutes", 30, "length of each run's faults, in minutes");
  const int64_t users = s.integer("users", 2000, "users per client process (4 processes)");
  const int64_t rate = s.integer("rate", 400, "requests per second per client process");
  if (s.describing) return;

  boost::json::array out_runs;
  std::array<uint64_t, test::kFaultKinds> all_faults{};
  uint64_t requests = 0, passed = 0;
  boost::json::object outside_total;
  for (int64_t i = 0; i < runs; ++i) {
    const uint64_t seed = static_cast<uint64_t>(first_seed + i);
    const std::string dir = ctx.work_dir + "/run-" + std::to_string(seed);
    std::filesystem::create_directories(dir);
    const InDirectory in(dir);
    test::RunLogs::begin(dir);
    test::NemesisRunOptions o;
    o.seed = seed;
    o.length = std::chrono::milliseconds(static_cast<int64_t>(minutes * 60'000));
    o.users_per_client = static_cast<uint64_t>(users);
    o.rate_per_client = static_cast<int>(rate);
    ctx.result.say(format("== nemesis run %ld of %ld: seed %lu, %g minutes", i + 1, runs,
                          static_cast<unsigned long>(seed), minutes));
    const test::NemesisRunResult r = test::run_nemesis(o);

    boost::json::object run{{"seed", seed}, {"minutes", minutes}, {"dir", dir}};
    boost::json::object faults;
    uint64_t total = 0, failed = 0;
    for (size_t k = 0; k < test::kFaultKinds; ++k) {
      faults[test::fault_name(static_cast<test::FaultKind>(k))] = r.counts[k];
      all_faults[k] += r.counts[k];
      total += r.counts[k];
    }
    for (const test::FaultRecord& f : r.faults) failed += !f.took_effect;
    run["faults"] = std::move(faults);
    run["faults_total"] = total;
    run["faults_failed"] = failed;
    // The checker's own JSON (ops by status, anomalies by rule and window, examples).
    run["check"] = boost::json::parse(history::render_json(r.report));
    run["passed"] = r.report.passed();
    passed += r.report.passed();
    for (const auto& op : r.report.ops) {
      for (uint64_t n : op) requests += n;
    }
    for (history::Rule rule : history::kRules) {
      const char* name = history::to_string(rule);
      const uint64_t n = r.report.tally(rule).outside;
      outside_total[name] =
          (outside_total.contains(name) ? outside_total[name].to_number<uint64_t>() : 0) + n;
    }
    ctx.result.say(format("   %lu faults took effect (%lu did not); %s", total, failed,
                          r.report.passed() ? "PASSED" : "FAILED"));
    ctx.result.say(history::render_text(r.report));
    out_runs.push_back(std::move(run));
  }
  boost::json::object totals;
  boost::json::object faults;
  uint64_t total = 0;
  for (size_t k = 0; k < test::kFaultKinds; ++k) {
    faults[test::fault_name(static_cast<test::FaultKind>(k))] = all_faults[k];
    total += all_faults[k];
  }
  totals["faults"] = std::move(faults);
  totals["faults_total"] = total;
  totals["requests"] = requests;
  totals["anomalies_outside"] = std::move(outside_total);
  totals["runs_passed"] = passed;
  ctx.result.figures["runs"] = std::move(out_runs);
  ctx.result.figures["totals"] = std::move(totals);
  ctx.result.say(format("== %lu runs, %lu passed, %lu faults in all",
                        static_cast<unsigned long>(runs), static_cast<unsigned long>(passed),
                        static_cast<unsigned long>(total)));
}

}  // namespace

IMHASH_BENCH_SCENARIO("nemesis", "long runs under faults, every answer checked (needs root)",
                      run_nemesis_scenario);

}  // namespace imhash::bench
