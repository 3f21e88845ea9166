// The config server's status page, loaded in headless Chromium (Debian's chromium, installed by
// scripts/setup.sh): after its scripts ran, the page shows the table version, every node, the
// id ranges of each hash server, each server's stream and the automatic purges waiting.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "harness/config_cluster.h"
#include "harness/wait_until.h"

using namespace imhash::test;

namespace {

std::string chromium_dom(const std::string& url) {
  const std::string profile = "chromium_profile." + std::to_string(getpid());
  // The flags keep Chromium off the network (this machine has none) and away from the GPU.
  ChildProcess chrome(
      "/usr/bin/chromium",
      {"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
       "--disable-background-networking", "--disable-component-update", "--disable-sync",
       "--user-data-dir=" + profile, "--virtual-time-budget=4000", "--dump-dom", url});
  std::string dom = chrome.read_all(std::chrono::seconds(60));
  chrome.stop(0, std::chrono::seconds(20));
  std::error_code ec;
  std::filesystem::remove_all(profile, ec);
  return dom;
}

// Chromium is there, and `c` serves: three hash servers in the table (version 1), then the imctl
// command `change` (version 2), and a login server; every node runs version 2.
void serve_after(ConfigCluster& c, const std::vector<std::string>& change) {
  REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/chromium"),
                  "Debian's chromium is missing: scripts/setup.sh installs it");
  c.start_config();
  for (int i = 1; i <= 3; ++i) c.start_hash(i);
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2", "hash3"}).exit_code == 0);
  REQUIRE(c.imctl(change).exit_code == 0);
  c.start_login(1);
  REQUIRE(c.wait_converged(2, 4));
}

}  // namespace

TEST_CASE("status_page: Chromium shows the version, the nodes and each server's ranges") {
  ConfigCluster c;
  serve_after(c, {"assign", "1-1000", "hash3"});

  const std::string dom = chromium_dom("http://" + c.admin_address() + "/");
  CHECK(dom.find("<b id=\"version\">2</b>") != std::string::npos);
  CHECK(dom.find("<b id=\"mode\">range</b>") != std::string::npos);
  CHECK(dom.find("<b id=\"converged\">yes</b>") != std::string::npos);
  CHECK(dom.find("<b id=\"control\">single; file ") != std::string::npos);
  for (const char* node : {"hash1", "hash2", "hash3", "login1"}) {
    CHECK_MESSAGE(
        dom.find(std::string("<td class=\"node-name\">") + node + "</td>") != std::string::npos,
        node);
  }
  // Range mode draws one segment per range: hash3 owns two (1-1000 and its third).
  size_t hash3_segments = 0;
  for (size_t at = dom.find("data-server=\"hash3\""); at != std::string::npos;
       at = dom.find("data-server=\"hash3\"", at + 1)) {
    ++hash3_segments;
  }
  CHECK(hash3_segments == 2);
  if (hash3_segments != 2) MESSAGE(dom);
}

TEST_CASE("status_page: Chromium shows each server's stream and the automatic purges waiting") {
  REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/chromium"),
                  "Debian's chromium is missing: scripts/setup.sh installs it");
  // A grace period longer than the test: the purge after the move stays waiting for it.
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 600000});
  c.start_config();
  c.start_hash(1);
  c.start_hash(2);
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2"}).exit_code == 0);
  REQUIRE(c.imctl({"assign", "1-1000", "hash2"}).exit_code == 0);  // version 2: hash1 streams
  // hash1's report of its stream done at version 2 has reached the config server.
  REQUIRE(wait_until([&] {
    const boost::json::value status = c.imctl_json({"status"});
    for (const auto& n : status.as_object().at("nodes").as_array()) {
      const auto& o = n.as_object();
      if (o.at("name").as_string() != "hash1" || !o.at("stream").is_object()) continue;
      const auto& stream = o.at("stream").as_object();
      return stream.at("state").as_string() == "done" &&
             stream.at("version").to_number<uint64_t>() == 2;
    }
    return false;
  }));

  const std::string dom = chromium_dom("http://" + c.admin_address() + "/");
  CHECK(dom.find("<td class=\"stream-server\">hash1</td><td class=\"stream-state\">done</td>"
                 "<td class=\"stream-version\">2</td>") != std::string::npos);
  const size_t pending = dom.find(
      "<td class=\"pending-server\">hash1</td><td class=\"pending-version\">2</td>"
      "<td class=\"pending-waits\">");
  CHECK(pending != std::string::npos);
  CHECK(dom.find("grace", pending) != std::string::npos);
  if (pending == std::string::npos) MESSAGE(dom);
}

TEST_CASE("status_page: with replicas Chromium shows the copies and each server's lag") {
  ConfigCluster c;
  serve_after(c, {"replicas", "2"});

  const std::string dom = chromium_dom("http://" + c.admin_address() + "/");
  CHECK(dom.find("<b id=\"replicas\">2</b>") != std::string::npos);
  // Nothing is held for any server: each hash server's row says 0, the login server's "-".
  size_t lags = 0;
  for (size_t at = dom.find("<td class=\"node-lag\">0</td>"); at != std::string::npos;
       at = dom.find("<td class=\"node-lag\">0</td>", at + 1)) {
    ++lags;
  }
  CHECK(lags == 3);
  CHECK(dom.find("<td class=\"node-lag\">-</td>") != std::string::npos);
  if (lags != 3) MESSAGE(dom);
}
