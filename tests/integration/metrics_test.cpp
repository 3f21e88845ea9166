// GET /metrics on every daemon, scraped before and after a load: the figures move as the load says.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "tests/integration/child_process.h"

using namespace imhash::test;

namespace {

// GET http://127.0.0.1:PORT/metrics; the body ("" on failure).
std::string scrape(const std::string& address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_of(address));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[65536];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

// Sums every sample of `name` whose label set contains `label` (e.g. status="OK"), or all.
double metric(const std::string& text, const std::string& name, const std::string& label = "") {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    const std::string key = line.substr(0, space);
    const std::string base = key.substr(0, key.find('{'));
    if (base != name) continue;
    if (!label.empty() && key.find(label) == std::string::npos) continue;
    sum += std::stod(line.substr(space + 1));
  }
  return sum;
}

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
  bool registered = false;
  for (int i = 0; i < 200 && !registered; ++i) {
    registered = metric(scrape(caddr[2]), "imhash_config_nodes", "state=\"up\"") >= 1;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(registered);
  ChildProcess imctl(IMHASH_IMCTL, {"--admin", caddr[1], "server", "add", "hash1"});
  REQUIRE(imctl.stop(0) == 0);
  ChildProcess login(IMHASH_LOGIN_SERVER,
                     {"--udp", "127.0.0.1:0", "--config", caddr[0], "--threads", "2", "--metrics",
                      "127.0.0.1:0", "--rate-limit", "0"});
  const auto laddr = login.wait_listening(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // one sampling of the workers

  const std::string before = scrape(laddr[1]);
  CHECK(metric(before, "imhash_table_version") == 1);
  CHECK(metric(before, "imhash_login_datagrams_total") == 0);
  CHECK(metric(before, "imhash_login_links", "state=\"up\"") == 4);  // 2 threads x 2 shards

  ChildProcess sim(IMHASH_UDP_SIM, {"--target", laddr[0], "--users", "3000", "--duration", "2",
                                    "--json", "--log-level", "warn"});
  const std::string out = sim.read_all(std::chrono::seconds(60));
  REQUIRE(sim.stop(0) == 0);
  const auto summary = boost::json::parse(out.substr(out.find('{'))).as_object();
  const double requests = summary.at("requests").to_number<double>();
  const double ok = summary.at("status").as_object().at("OK").to_number<double>();
  REQUIRE(requests > 0);
  std::this_thread::sleep_for(
      std::chrono::milliseconds(1200));  // counters are sampled twice a second

  const std::string after = scrape(laddr[1]);
  CHECK(metric(after, "imhash_login_datagrams_total") == requests);
  CHECK(metric(after, "imhash_login_replies_total", "status=\"OK\"") == ok);
  CHECK(metric(after, "imhash_login_forwarded_total") == requests);
  CHECK(metric(after, "imhash_login_request_seconds_count") == requests);
  CHECK(metric(after, "imhash_login_request_seconds_sum") > 0);

  const std::string hashed = scrape(haddr[1]);
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

  const std::string configured = scrape(caddr[2]);
  CHECK(metric(configured, "imhash_config_table_version") == 1);
  CHECK(metric(configured, "imhash_config_nodes", "state=\"up\"") == 2);
  CHECK(metric(configured, "imhash_config_node_records") == metric(hashed, "imhash_hash_records"));
  std::filesystem::remove_all(state);
}
