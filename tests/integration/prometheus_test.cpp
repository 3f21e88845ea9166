// Observability with the real tools (Debian's prometheus package, installed by scripts/setup.sh):
// `promtool check metrics` passes on every daemon's /metrics, and a real Prometheus (loopback,
// temporary directory, 1 s scrapes) scrapes a config server, two hash servers and a login server
// under a little load, loads deploy/prometheus/alerts.yml, and answers through its HTTP API with
// the request counter and the table version of every node. Every query of the Grafana dashboard
// (deploy/grafana/imhash.json) runs there too.
#include <doctest/doctest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/http_get.h"
#include "harness/log_file.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"

using namespace imhash;
using namespace imhash::test;

namespace {

const char* kPrometheus = "/usr/bin/prometheus";
const char* kPromtool = "/usr/bin/promtool";

// Runs a shell command; its exit code, and its output (stdout and stderr) in `out`.
int run(const std::string& command, std::string& out) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  out.clear();
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Between the questions of a wait_until: each may be an HTTP query to Prometheus.
constexpr std::chrono::milliseconds kPrometheusPoll{50};

class Prometheus {
 public:
  // Starts Prometheus with `config` (YAML) in a directory of its own; waits until it is ready.
  Prometheus(const std::string& dir, const std::string& config) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/prometheus.yml") << config;
    const std::string log = std::filesystem::absolute(dir + "/prometheus.log");
    process_ = std::make_unique<ChildProcess>(
        kPrometheus,
        std::vector<std::string>{"--config.file=" + dir + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir + "/data",
                                 "--web.listen-address=127.0.0.1:0", "--log.level=info"},
        ChildOptions{.stderr_log = log});
    // Port 0: the port it took is in its log: msg="Listening on" address=127.0.0.1:PORT
    const std::regex listening(R"re(msg="Listening on" address=(127\.0\.0\.1:[0-9]+))re");
    REQUIRE(wait_until(
        [&] {
          std::smatch m;
          const std::string text = file_text(log);
          if (!std::regex_search(text, m, listening)) return false;
          address_ = m[1];
          return true;
        },
        kPatience, kPrometheusPoll));
    REQUIRE(wait_until([&] { return http_get(address_, "/-/ready").status == 200; }, kPatience,
                       kPrometheusPoll));
  }

  // GET /api/v1/...; the parsed answer (null when Prometheus did not answer with JSON).
  boost::json::value api(const std::string& target) {
    const auto reply = http_get(address_, "/api/v1/" + target);
    boost::system::error_code ec;
    auto v = boost::json::parse(reply.body, ec);
    return ec ? boost::json::value() : v;
  }
  // An instant query's result vector (empty on error).
  boost::json::array query(const std::string& promql) {
    const auto v = api("query?query=" + url_encode(promql));
    if (!v.is_object() || v.at("status").as_string() != "success") return {};
    return v.at("data").at("result").as_array();
  }

 private:
  std::unique_ptr<ChildProcess> process_;
  std::string address_;
};

double value_of(const boost::json::value& sample) {
  return std::stod(std::string(sample.at("value").as_array().at(1).as_string()));
}

std::string label(const boost::json::value& sample, const char* name) {
  const auto* v = sample.at("metric").as_object().if_contains(name);
  return v ? std::string(v->as_string()) : "";
}

// Every "expr" in the dashboard's panels, with Grafana's variables replaced for a plain query.
std::vector<std::string> dashboard_queries(const boost::json::value& dashboard) {
  std::vector<std::string> out;
  std::function<void(const boost::json::value&)> walk = [&](const boost::json::value& v) {
    if (v.is_object()) {
      for (const auto& [key, child] : v.as_object()) {
        if (key == "expr" && child.is_string()) {
          std::string q(child.as_string());
          q = std::regex_replace(q, std::regex(R"(\$__rate_interval)"), "1m");
          q = std::regex_replace(q, std::regex(R"(\$__interval)"), "15s");
          q = std::regex_replace(q, std::regex(R"(\$[a-z_]+)"), ".*");
          out.push_back(q);
        } else {
          walk(child);
        }
      }
    } else if (v.is_array()) {
      for (const auto& child : v.as_array()) walk(child);
    }
  };
  walk(dashboard);
  return out;
}

}  // namespace

TEST_CASE("prometheus: promtool passes every /metrics, and Prometheus scrapes all three daemons") {
  REQUIRE_MESSAGE(std::filesystem::exists(kPrometheus),
                  "Debian's prometheus is missing: scripts/setup.sh installs it");
  REQUIRE(std::filesystem::exists(kPromtool));
  ConfigCluster c(ConfigClusterOptions{.shards = 2, .metrics = true});
  const uint16_t udp = c.start_serving(2);
  const uint64_t version = c.version();

  // A little load: logins and lookups, so that the request counters and the histogram move.
  UdpClient client(udp);
  int ok = 0;
  for (uint64_t user = 1; user <= 200; ++user) {
    const auto r =
        client.call(UdpClient::make(client::Op::kLogin, user, Endpoint::v4(0x0a000001u, 4000)));
    if (r && r->status == client::Status::kOk) ++ok;
    client.call(UdpClient::make(client::Op::kLookup, user));
  }
  REQUIRE(ok > 0);

  const std::vector<std::pair<std::string, std::string>> targets = {
      {"imhash-config", c.config_metrics()},
      {"imhash-hash", c.hash_metrics(1)},
      {"imhash-hash", c.hash_metrics(2)},
      {"imhash-login", c.login_metrics(1)}};

  {  // promtool check metrics, on each daemon's /metrics
    // Scraped once the load has been sampled (every 500 ms), so every metric family is there.
    REQUIRE(wait_until(
        [&] { return metric(scrape(c.login_metrics(1)), "imhash_login_replies_total", "OK") > 0; },
        kPatience, kPrometheusPoll));
    for (const auto& target : targets) {  // not [job, address]: clang 14 cannot capture bindings
      const auto& [job, address] = target;
      CAPTURE(target.first);
      const std::string file = "promtool_metrics." + std::to_string(getpid()) + ".txt";
      std::ofstream(file) << scrape(address);
      std::string out;
      const int rc = run(std::string(kPromtool) + " check metrics < " + file, out);
      CAPTURE(out);
      CHECK(rc == 0);
      CHECK(out.find("imhash") == std::string::npos);  // no lint finding names a metric of ours
      std::filesystem::remove(file);
    }
  }

  {  // Prometheus scrapes them, loads the alert rules and answers the dashboard's queries
    std::string scrape_configs;
    for (const std::string job : {"imhash-config", "imhash-hash", "imhash-login"}) {
      scrape_configs += "  - job_name: " + job + "\n    static_configs:\n      - targets: [";
      bool first = true;
      for (const auto& [j, address] : targets) {
        if (j != job) continue;
        scrape_configs += (first ? "'" : ", '") + address + "'";
        first = false;
      }
      scrape_configs += "]\n";
    }
    const std::string dir = std::filesystem::absolute("prometheus." + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    Prometheus prom(dir,
                    "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - " IMHASH_SOURCE_DIR
                    "/deploy/prometheus/alerts.yml\n"
                    "scrape_configs:\n" +
                        scrape_configs);

    // Every target up.
    CHECK(wait_until(
        [&] {
          const auto up = prom.query("up");
          int n = 0;
          for (const auto& s : up) n += value_of(s) == 1;
          return n == 4;
        },
        kPatience, kPrometheusPoll));
    // A request counter: the replies the login server sent, by status.
    CHECK(wait_until(
        [&] {
          const auto r = prom.query(R"(sum(imhash_login_replies_total{status="OK"}))");
          return r.size() == 1 && value_of(r[0]) >= ok;
        },
        kPatience, kPrometheusPoll));
    // The table version of every node: from each node itself, and as the config server saw it.
    CHECK(wait_until(
        [&] {
          const auto r = prom.query("imhash_table_version");
          int at_version = 0;
          for (const auto& s : r) at_version += value_of(s) == static_cast<double>(version);
          return r.size() == 3 && at_version == 3;
        },
        kPatience, kPrometheusPoll));
    const auto nodes = prom.query("imhash_config_node_version");
    std::vector<std::string> names;
    for (const auto& s : nodes) {
      names.push_back(label(s, "name"));
      CHECK(value_of(s) == static_cast<double>(version));
    }
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"hash1", "hash2", "login1"});
    CHECK(prom.query("imhash_config_converged").size() == 1);

    // The alert rules loaded and evaluate cleanly; with everything healthy none fires.
    CHECK(wait_until(
        [&] {
          const auto v = prom.api("rules");
          if (!v.is_object()) return false;
          int rules = 0, healthy = 0;
          for (const auto& g : v.at("data").at("groups").as_array()) {
            for (const auto& r : g.at("rules").as_array()) {
              ++rules;
              healthy += r.at("health").as_string() == "ok";
            }
          }
          return rules >= 6 && healthy == rules;
        },
        kPatience, kPrometheusPoll));
    CHECK(prom.query(R"(ALERTS{alertstate="firing"})").empty());

    // The dashboard's queries are valid PromQL and find data (rates need two scrapes first).
    const auto dashboard =
        boost::json::parse(file_text(IMHASH_SOURCE_DIR "/deploy/grafana/imhash.json"));
    const auto queries = dashboard_queries(dashboard);
    CHECK(queries.size() >= 6);
    for (const auto& q : queries) {
      CAPTURE(q);
      const auto v = prom.api("query?query=" + url_encode(q));
      REQUIRE(v.is_object());
      CHECK(v.at("status").as_string() == "success");
      CHECK(wait_until([&] { return !prom.query(q).empty(); }, std::chrono::seconds(10),
                       kPrometheusPoll));
    }
    std::filesystem::remove_all(dir);
  }
}
