// Proved under faults (issue 33, docs/reliability.md): the short seeded run CI makes on every
// commit. A cluster of hosts in network namespaces (3 etcd members and config servers, 4 hash
// servers with 2 copies of every record, 2 login servers, 2 client hosts), the nemesis breaking it
// in four lanes at once for a minute, and every answer the clients got checked against the
// history of what was acknowledged: no anomaly outside the windows the design allows, and no
// UNAVAILABLE or TIMEOUT while a copy of the record was reachable.
//
// The seed is IMHASH_NEMESIS_SEED if set (to replay a run), otherwise drawn and printed. Needs
// root and network namespaces: without them the test says why and passes as skipped, except where
// CI=true, where it fails.
//
// Not yet in the suite CI runs: it runs only with IMHASH_NEMESIS=1 (scripts/test.sh passes it
// through), because it still finds anomalies the product has (docs/reliability.md, "What the runs
// found"), and a suite that fails on every commit proves nothing. It joins CI once ten seeds in a
// row pass.
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "harness/nemesis_run.h"

using namespace imhash;
using namespace imhash::test;

TEST_CASE("nemesis: a seeded minute of faults, several at once, and every answer checked") {
  if (const char* on = std::getenv("IMHASH_NEMESIS"); !on || std::string(on) != "1") {
    MESSAGE("SKIPPED: set IMHASH_NEMESIS=1 to run it (not in CI yet: docs/reliability.md)");
    return;
  }
  NemesisRunOptions o;
  const char* given = std::getenv("IMHASH_NEMESIS_SEED");
  o.seed = given ? std::strtoull(given, nullptr, 10) : std::random_device()() % 1000000 + 1;
  o.length = std::chrono::seconds(60);
  MESSAGE("nemesis seed " << o.seed << " (IMHASH_NEMESIS_SEED=" << o.seed << " replays it)");
  NemesisRunResult r;
  try {
    r = run_nemesis(o);
  } catch (const HostsUnavailable& e) {
    if (hosts_required())
      FAIL("CI=true, and this machine cannot make hosts: " << std::string(e.what()));
    MESSAGE("SKIPPED: " << std::string(e.what()));
    return;
  }
  std::string faults;
  uint64_t total = 0;
  for (size_t k = 0; k < kFaultKinds; ++k) {
    faults += std::string(k ? ", " : "") + fault_name(static_cast<FaultKind>(k)) + " " +
              std::to_string(r.counts[k]);
    total += r.counts[k];
  }
  MESSAGE("seed " << r.seed << ": " << total << " faults took effect (" << faults << "); files in "
                  << r.dir);
  MESSAGE(history::render_text(r.report));
  CHECK(total >= 10);  // several of each lane in a minute
  CHECK(r.report.judged_lookups > 1000);
  CHECK(r.report.passed());
}
