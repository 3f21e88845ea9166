#include "tests/integration/sim_runs.h"

#include <doctest/doctest.h>

#include <string>

#include "harness/udp_sim_run.h"

namespace imhash::test {

namespace json = boost::json;

UdpSimSummary summary_of(ChildProcess& sim) {
  try {
    return read_udp_sim_summary(sim);
  } catch (const std::exception& e) {
    FAIL(std::string(e.what()));
  }
  return {};  // not reached: FAIL throws
}

namespace {

// A verified storm of `users` from `first` through `udp`, plus `extra` flags; waits for it.
UdpSimSummary storm(uint16_t udp, uint64_t first, uint64_t users,
                    std::initializer_list<std::string> extra, int& exit_code) {
  std::vector<std::string> args = {"--target",     "127.0.0.1:" + std::to_string(udp),
                                   "--users",      std::to_string(users),
                                   "--first-user", std::to_string(first),
                                   "--storm",      "--verify",
                                   "--timeout-ms", "1000",
                                   "--duration",   "200",
                                   "--log-level",  "warn"};
  args.insert(args.end(), extra.begin(), extra.end());
  UdpSim sim(args);
  UdpSimSummary s;
  try {
    s = sim.wait();
  } catch (const std::exception& e) {
    FAIL(std::string(e.what()));
  }
  exit_code = sim.exit_code();
  return s;
}

}  // namespace

void log_in(uint16_t udp, uint64_t first, uint64_t users) {
  int exit_code = -1;
  const UdpSimSummary s = storm(udp, first, users, {}, exit_code);
  REQUIRE(s.verify.result == "pass");
  REQUIRE(s.count("OK") == 2 * users);  // LOGIN and LOOKUP each
  REQUIRE(exit_code == 0);
}

uint64_t found(uint16_t udp, uint64_t first, uint64_t users) {
  int exit_code = -1;
  const UdpSimSummary s = storm(udp, first, users, {"--lookup-only"}, exit_code);
  if (s.verify.verify_failed != 0) MESSAGE(json::serialize(s.json.at("verify")));
  return s.verify.verified_ok;
}

uint64_t kept(uint16_t udp, uint64_t first, uint64_t users) {
  constexpr int kPasses = 3;
  uint64_t ok = 0;
  for (int pass = 1; pass <= kPasses; ++pass) {
    int exit_code = -1;
    const UdpSimSummary s = storm(udp, first, users, {"--lookup-only"}, exit_code);
    ok = s.verify.verified_ok;
    if (s.verify.verify_failed != 0) {  // a wrong answer (NOT_FOUND, another endpoint) is final
      MESSAGE(json::serialize(s.json.at("verify")));
      break;
    }
    const UdpSimOp& lookups = s.op("LOOKUP");
    const uint64_t unanswered =
        lookups.count("TIMEOUT") + lookups.count("UNAVAILABLE") + lookups.no_reply;
    if (unanswered == 0) break;
    MESSAGE("pass " << pass << " of " << kPasses << ": " << unanswered
                    << " lookups answered TIMEOUT or UNAVAILABLE or not at all; asking again");
  }
  return ok;
}

std::unique_ptr<ChildProcess> start_load(uint16_t udp, uint64_t first, uint64_t users, int rate,
                                         int seconds) {
  return std::make_unique<ChildProcess>(
      IMHASH_UDP_SIM,
      std::vector<std::string>{"--target", "127.0.0.1:" + std::to_string(udp), "--users",
                               std::to_string(users), "--first-user", std::to_string(first),
                               "--rate", std::to_string(rate), "--duration",
                               std::to_string(seconds), "--verify", "--timeout-ms", "1000",
                               "--json", "--log-level", "warn"},
      ChildOptions{.name = "udp_sim"});
}

void check_load(ChildProcess& sim) {
  const UdpSimSummary s = summary_of(sim);
  if (!s.verify.passed()) MESSAGE(json::serialize(s.json.at("verify")));
  CHECK(s.verify.result == "pass");
  const UdpSimOp& lookups = s.op("LOOKUP");
  uint64_t answered = 0;
  // Not a structured binding: clang 14 cannot capture one in CAPTURE's lambda.
  for (const auto& entry : lookups.status) {
    const std::string& name = entry.first;
    const uint64_t n = entry.second;
    CAPTURE(name);
    CAPTURE(n);
    if (name != "OK" && name != "NOT_FOUND") CHECK(n == 0);
    answered += n;
  }
  CHECK(answered == lookups.requests);
  CHECK(lookups.requests > 1000);
  sim.stop(0);
}

}  // namespace imhash::test
