#include "tests/integration/sim_runs.h"

#include <doctest/doctest.h>

#include <chrono>
#include <string>

namespace imhash::test {

namespace json = boost::json;

json::object run_sim(ChildProcess& sim) {
  const std::string out = sim.read_all(std::chrono::seconds(240));
  const auto at = out.find('{');
  REQUIRE(at != std::string::npos);
  return json::parse(out.substr(at)).as_object();
}

uint64_t number(const json::object& o, std::string_view key) {
  return o.at(key).to_number<uint64_t>();
}

void log_in(uint16_t udp, uint64_t first, uint64_t users) {
  ChildProcess sim(IMHASH_UDP_SIM, {"--target", "127.0.0.1:" + std::to_string(udp), "--users",
                                    std::to_string(users), "--first-user", std::to_string(first),
                                    "--storm", "--verify", "--timeout-ms", "1000", "--duration",
                                    "200", "--json", "--log-level", "warn"});
  const json::object s = run_sim(sim);
  REQUIRE(s.at("verify").as_object().at("result").as_string() == "pass");
  REQUIRE(number(s.at("status").as_object(), "OK") == 2 * users);  // LOGIN and LOOKUP each
  REQUIRE(sim.stop(0) == 0);
}

uint64_t found(uint16_t udp, uint64_t first, uint64_t users) {
  ChildProcess sim(IMHASH_UDP_SIM, {"--target", "127.0.0.1:" + std::to_string(udp), "--users",
                                    std::to_string(users), "--first-user", std::to_string(first),
                                    "--storm", "--lookup-only", "--verify", "--timeout-ms", "1000",
                                    "--duration", "200", "--json", "--log-level", "warn"});
  const json::object s = run_sim(sim);
  sim.stop(0);
  const json::object& v = s.at("verify").as_object();
  if (number(v, "verify_failed") != 0) MESSAGE(json::serialize(v));
  return number(v, "verified_ok");
}

std::unique_ptr<ChildProcess> start_load(uint16_t udp, uint64_t first, uint64_t users, int rate,
                                         int seconds) {
  return std::make_unique<ChildProcess>(
      IMHASH_UDP_SIM, std::vector<std::string>{
                          "--target", "127.0.0.1:" + std::to_string(udp), "--users",
                          std::to_string(users), "--first-user", std::to_string(first), "--rate",
                          std::to_string(rate), "--duration", std::to_string(seconds), "--verify",
                          "--timeout-ms", "1000", "--json", "--log-level", "warn"});
}

void check_load(ChildProcess& sim) {
  const json::object s = run_sim(sim);
  const auto& verify = s.at("verify").as_object();
  if (verify.at("result").as_string() != "pass") MESSAGE(json::serialize(verify));
  CHECK(verify.at("result").as_string() == "pass");
  const auto& lookups = s.at("ops").as_object().at("LOOKUP").as_object();
  const auto& status = lookups.at("status").as_object();
  uint64_t answered = 0;
  for (const auto& entry : status) {
    const std::string name(entry.key());
    const uint64_t n = entry.value().to_number<uint64_t>();
    CAPTURE(name);
    CAPTURE(n);
    if (name != "OK" && name != "NOT_FOUND") CHECK(n == 0);
    answered += n;
  }
  CHECK(answered == number(lookups, "requests"));
  CHECK(number(lookups, "requests") > 1000);
  sim.stop(0);
}

}  // namespace imhash::test
