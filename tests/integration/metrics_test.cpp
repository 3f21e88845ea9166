// GET /metrics on every daemon, scraped before and after a load: the figures move as the load says.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "harness/child_process.h"
#include "harness/http_get.h"
#include "harness/udp_sim_run.h"
#include "harness/wait_until.h"

using namespace imhash::test;

namespace {

constexpr auto kScrapeInterval = std::chrono::milliseconds(50);  // between polls of /metrics

}  // namespace

TEST_CASE("metrics: every daemon's /metrics follows the load") {
  const std::string state = "metrics_state." + std::to_string(getpid());
  std::filesystem::remove_all(state);
  ChildProcess config(IMHASH_CONFIG_SERVER,
                      {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", state,
                       "--heartbeat-ms", "100", "--metrics", "127.0.0.1:0"});
  const auto caddr = config.wait_listening(3);
  ChildProcess hash(IMHASH_HASH_SERVER, {"--name", "hash1", "--shards", "2", "--config", caddr[0],
                                         "--metrics", "127.0.0.1:0"});
  const auto haddr = hash.wait_listening(2);
  REQUIRE(wait_until(
      [&] { return metric(scrape(caddr[2]), "imhash_config_nodes", "state=\"up\"") >= 1; },
      kPatience, kScrapeInterval));
  ChildProcess imctl(IMHASH_IMCTL, {"--admin", caddr[1], "server", "add", "hash1"});
  REQUIRE(imctl.stop(0) == 0);
  ChildProcess login(IMHASH_LOGIN_SERVER,
                     {"--udp", "127.0.0.1:0", "--config", caddr[0], "--threads", "2", "--metrics",
                      "127.0.0.1:0", "--rate-limit", "0"});
  const auto laddr = login.wait_listening(2);
  // The workers' figures reach /metrics when they are next sampled (twice a second): wait for the
  // first sample that sees the table and every link up.
  std::string before;
  CHECK(wait_until(
      [&] {
        before = scrape(laddr[1]);
        return metric(before, "imhash_table_version") == 1 &&
               metric(before, "imhash_login_links", "state=\"up\"") == 4;
      },
      kPatience, kScrapeInterval));
  CHECK(metric(before, "imhash_table_version") == 1);
  CHECK(metric(before, "imhash_login_datagrams_total") == 0);
  CHECK(metric(before, "imhash_login_links", "state=\"up\"") == 4);  // 2 threads x 2 shards

  ChildProcess sim(IMHASH_UDP_SIM, {"--target", laddr[0], "--users", "3000", "--duration", "2",
                                    "--json", "--log-level", "warn"});
  const UdpSimSummary summary = read_udp_sim_summary(sim, std::chrono::seconds(60));
  REQUIRE(sim.stop(0) == 0);
  const auto requests = static_cast<double>(summary.requests);
  const auto ok = static_cast<double>(summary.count("OK"));
  REQUIRE(requests > 0);
  // Counters are sampled twice a second, and the config server learns the records from the hash
  // server's heartbeats: wait until every figure has caught up with the finished load, then
  // check them all.
  std::string after, hashed, configured;
  CHECK(wait_until(
      [&] {
        after = scrape(laddr[1]);
        hashed = scrape(haddr[1]);
        configured = scrape(caddr[2]);
        return metric(after, "imhash_login_datagrams_total") == requests &&
               metric(after, "imhash_login_request_seconds_count") == requests &&
               metric(hashed, "imhash_hash_requests_total") == requests &&
               metric(configured, "imhash_config_node_records") ==
                   metric(hashed, "imhash_hash_records");
      },
      kPatience, kScrapeInterval));
  CHECK(metric(after, "imhash_login_datagrams_total") == requests);
  CHECK(metric(after, "imhash_login_replies_total", "status=\"OK\"") == ok);
  CHECK(metric(after, "imhash_login_forwarded_total") == requests);
  CHECK(metric(after, "imhash_login_request_seconds_count") == requests);
  CHECK(metric(after, "imhash_login_request_seconds_sum") > 0);

  CHECK(metric(hashed, "imhash_hash_requests_total") == requests);
  CHECK(metric(hashed, "imhash_hash_records") > 0);
  CHECK(metric(hashed, "imhash_hash_records") <= 3000);
  CHECK(metric(hashed, "imhash_hash_connections") == 4);
  // Every batch of requests is a timed turn of a shard's event loop.
  CHECK(metric(hashed, "imhash_hash_longest_turn_seconds") > 0);
  CHECK(metric(hashed, "imhash_hash_turn_seconds_count") > 0);
  CHECK(metric(hashed, "imhash_hash_turn_seconds_bucket", "le=\"+Inf\"") ==
        metric(hashed, "imhash_hash_turn_seconds_count"));
  CHECK(metric(hashed, "imhash_table_version") == 1);

  CHECK(metric(configured, "imhash_config_table_version") == 1);
  CHECK(metric(configured, "imhash_config_nodes", "state=\"up\"") == 2);
  CHECK(metric(configured, "imhash_config_node_records") == metric(hashed, "imhash_hash_records"));
  std::filesystem::remove_all(state);
}
