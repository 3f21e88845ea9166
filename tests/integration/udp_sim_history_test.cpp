// udp_sim --history, the real binary against the fake login server (fake_login_server.h): the file
// holds every request once, in the documented format (tools/udp_sim/history_log.h), each write
// with an endpoint of its own, every LOOKUP answer is an endpoint its user's writes wrote, and a
// file that cannot be written fails the run.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/run_logs.h"
#include "harness/udp_sim_run.h"
#include "tests/integration/fake_login_server.h"

using namespace imhash;
using namespace std::chrono_literals;

namespace {

struct HistoryLine {
  int64_t invoke_ns = 0;
  int64_t complete_ns = 0;
  std::string op;
  uint64_t user = 0;
  std::string status;
  std::string endpoint;
};

struct History {
  std::vector<std::string> comments;  // without the leading "# "
  std::vector<HistoryLine> lines;
};

// Reads a history file, failing the test on any line that is not in the documented format.
History read_history(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  History h;
  std::string text;
  while (std::getline(in, text)) {
    CAPTURE(text);
    if (text.starts_with("# ")) {
      REQUIRE(h.lines.empty());  // comments come first
      h.comments.push_back(text.substr(2));
      continue;
    }
    std::istringstream fields(text);
    HistoryLine l;
    std::string rest;
    const bool six = static_cast<bool>(fields >> l.invoke_ns >> l.complete_ns >> l.op >> l.user >>
                                       l.status >> l.endpoint);
    REQUIRE(six);
    REQUIRE_FALSE(static_cast<bool>(fields >> rest));
    // Single spaces, nothing around them: the line is its fields joined again.
    REQUIRE(text == std::to_string(l.invoke_ns) + " " + std::to_string(l.complete_ns) + " " + l.op +
                        " " + std::to_string(l.user) + " " + l.status + " " + l.endpoint);
    h.lines.push_back(l);
  }
  return h;
}

uint64_t field(const test::UdpSimSummary& s, const char* name) {
  return s.json.at(name).to_number<uint64_t>();
}

}  // namespace

TEST_CASE("udp_sim: --history writes every request, each write with an endpoint of its own") {
  test::Faults faults;
  faults.drop_first_of_every = 7;  // with --retries 0: requests that end with status none
  test::FakeLoginServer server(faults);
  const std::string path = test::RunLogs::dir() + "/history.txt";
  test::UdpSim sim(
      {"--target", server.address(),   "--users", "300",          "--duration", "1",
       "--verify", "--retries",        "0",       "--timeout-ms", "50",         "--window",
       "16",       "--seed",           "11",      "--first-user", "5000",       "--history",
       path,       "--history-client", "3"});
  const test::UdpSimSummary s = sim.wait();
  server.stop();
  CAPTURE(s.text());
  CHECK(sim.exit_code() == 0);
  CHECK(s.verify.passed());
  CHECK(s.json.at("history").as_string() == path);
  CHECK(field(s, "history_client") == 3);

  const History h = read_history(path);
  REQUIRE(h.comments.size() >= 2);
  CHECK(h.comments[0] == "imhash-history 1");
  CHECK(h.comments[1].starts_with("udp_sim target=" + server.address() +
                                  " first_user=5000 users=300 seed=11 history_client=3 "));
  // Every request once (no warm-up: the summary's requests are all of them).
  CHECK(h.lines.size() == field(s, "history_records"));
  CHECK(h.lines.size() == s.requests);

  std::map<uint64_t, std::set<std::string>> written;  // user -> endpoints its writes carried
  for (const HistoryLine& l : h.lines) {
    if (l.op == "LOGIN" || l.op == "HEARTBEAT") {
      CAPTURE(l.endpoint);
      CHECK(l.endpoint.starts_with("[2001:db8:3:"));
      CHECK(l.endpoint.ends_with("]:5222"));
      CHECK(written[l.user].insert(l.endpoint).second);
    }
  }
  std::map<std::string, uint64_t> by_status;
  uint64_t lookups_found = 0;
  for (const HistoryLine& l : h.lines) {
    CAPTURE(l.op);
    CAPTURE(l.user);
    CAPTURE(l.endpoint);
    CHECK(l.invoke_ns > 0);
    CHECK(l.invoke_ns <= l.complete_ns);
    CHECK(l.user >= 5000);
    CHECK(l.user < 5300);
    ++by_status[l.status];
    if (l.op == "LOOKUP" && l.status == "OK") {
      CHECK(written[l.user].count(l.endpoint) == 1);  // a correct server returns a written one
      ++lookups_found;
    } else if (l.op != "LOGIN" && l.op != "HEARTBEAT") {
      CHECK(l.endpoint == "-");
    }
  }
  CHECK(lookups_found > 0);
  CHECK(by_status["none"] == s.no_reply + s.abandoned);
  CHECK(by_status["none"] > 0);
  CHECK(by_status["OK"] + by_status["NOT_FOUND"] == s.replies);
}

TEST_CASE("udp_sim: --history records the warm-up's requests too") {
  test::FakeLoginServer server;
  const std::string path = test::RunLogs::dir() + "/history.txt";
  test::UdpSim sim({"--target", server.address(), "--users", "100", "--warmup", "0.5", "--duration",
                    "0.5", "--rate", "1000", "--history", path});
  const test::UdpSimSummary s = sim.wait();
  server.stop();
  CAPTURE(s.text());
  CHECK(sim.exit_code() == 0);
  const History h = read_history(path);
  CHECK(h.lines.size() == field(s, "history_records"));
  CHECK(h.lines.size() > s.requests + 300);  // about 500 in the warm-up
  CHECK(h.lines.size() <= server.received());
}

TEST_CASE("udp_sim: a --history that cannot be written fails the run (exit 70)") {
  test::FakeLoginServer server;
  test::UdpSim sim({"--target", server.address(), "--users", "10", "--duration", "0.3", "--history",
                    "/dev/full"});  // opens, then every write fails: ENOSPC
  const test::UdpSimSummary s = sim.wait();
  CHECK(sim.exit_code() == 70);
  CHECK(field(s, "history_records") > 0);
}

// A measurement, not a test: what --history costs the send/receive loop. Run by hand with
//   integration_tests --no-skip -tc='udp_sim: closed-loop throughput with and without --history'
TEST_CASE("udp_sim: closed-loop throughput with and without --history" * doctest::skip()) {
  for (const bool history : {false, true, false, true}) {
    test::FakeLoginServer server;
    std::vector<std::string> args = {
        "--target", server.address(), "--users", "100000", "--duration", "3", "--window", "64"};
    if (history) {
      args.insert(args.end(), {"--history", test::RunLogs::dir() + "/throughput.txt"});
    }
    test::UdpSim sim(args);
    const test::UdpSimSummary s = sim.wait();
    MESSAGE(std::string(history ? "--history: " : "no history: ")
            << s.requests_per_s << " requests/s, p50 " << s.latency_us.p50 << " us, p99 "
            << s.latency_us.p99 << " us, " << field(s, "history_records") << " recorded");
    CHECK(sim.exit_code() == 0);
  }
}
