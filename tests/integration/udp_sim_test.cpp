// udp_sim, the real binary, against a fake login server that this test runs in a thread
// (fake_login_server.h). Checks --verify both ways, the JSON summary, retries with the same
// request_id, --observed, open-loop pacing, exit statuses, and SIGINT.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <unordered_set>

#include "harness/child_process.h"
#include "harness/loopback.h"
#include "harness/udp_sim_run.h"
#include "harness/wait_until.h"
#include "tests/integration/fake_login_server.h"

using namespace imhash;
using namespace std::chrono_literals;
using imhash::test::bind_loopback;
using imhash::test::ChildProcess;
using imhash::test::FakeLoginServer;
using imhash::test::Faults;
using imhash::test::wait_until;

namespace {

// Waits for `child` to exit by itself (killing it past `timeout`) and returns its exit status.
int wait_exit(ChildProcess& child, std::chrono::milliseconds timeout) {
  wait_until([&] { return !child.running(); }, timeout);
  return child.stop(SIGKILL);
}

struct SimRun {
  int exit_code = -1;
  boost::json::object summary;
};

// Runs udp_sim with --json and returns its exit status and parsed summary (harness/udp_sim_run.h:
// the summary's one reader; a run without one throws, failing the test with udp_sim's stderr).
SimRun run_json(std::vector<std::string> args, std::chrono::seconds budget) {
  test::UdpSim sim(std::move(args));
  SimRun r;
  r.summary = sim.wait(budget).json;
  r.exit_code = sim.exit_code();
  return r;
}

uint64_t num(const boost::json::value& v) { return v.to_number<uint64_t>(); }
const boost::json::object& obj(const boost::json::object& o, const char* key) {
  return o.at(key).as_object();
}

// The invariants every summary keeps, whatever the server did.
void check_accounting(const boost::json::object& s) {
  uint64_t requests = 0, replies = 0, no_reply = 0, abandoned = 0;
  for (const auto& entry : obj(s, "ops")) {  // not [name, v]: clang 14 cannot capture bindings
    const std::string name(entry.key());
    CAPTURE(name);
    const auto& op = entry.value().as_object();
    uint64_t by_status = 0;
    for (const auto& [status, n] : obj(op, "status")) by_status += num(n);
    CHECK(by_status == num(op.at("replies")));
    CHECK(num(op.at("requests")) ==
          num(op.at("replies")) + num(op.at("no_reply")) + num(op.at("abandoned")));
    CHECK(num(obj(op, "latency_us").at("count")) == num(op.at("replies")));
    requests += num(op.at("requests"));
    replies += num(op.at("replies"));
    no_reply += num(op.at("no_reply"));
    abandoned += num(op.at("abandoned"));
  }
  CHECK(requests == num(s.at("requests")));
  CHECK(replies == num(s.at("replies")));
  CHECK(no_reply == num(s.at("no_reply")));
  CHECK(abandoned == num(s.at("abandoned")));
  uint64_t by_status = 0;
  for (const auto& [status, n] : obj(s, "status")) by_status += num(n);
  CHECK(by_status == replies);
  CHECK(num(obj(s, "latency_us").at("count")) == replies);
}

// Runs udp_sim --json against `server` (`args` follow --target), stops the server, and checks the
// exit status and the accounting every summary keeps.
SimRun run_against(FakeLoginServer& server, std::vector<std::string> args, int expected_exit = 0) {
  args.insert(args.begin(), {"--target", server.address()});
  SimRun run = run_json(std::move(args), 30s);
  server.stop();
  CAPTURE(boost::json::serialize(run.summary));
  CHECK(run.exit_code == expected_exit);
  check_accounting(run.summary);
  return run;
}

}  // namespace

TEST_CASE("udp_sim: --verify passes against a correct server and the JSON summary adds up") {
  FakeLoginServer server;
  const SimRun run = run_against(server, {"--users", "2000", "--duration", "2", "--verify",
                                          "--seed", "7", "--first-user", "100000"});
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  CHECK(s.at("mode").as_string() == "closed");
  CHECK(num(s.at("window")) == 64);
  CHECK(num(s.at("users")) == 2000);
  CHECK(num(s.at("seed")) == 7);
  CHECK_FALSE(s.at("interrupted").as_bool());
  CHECK(s.at("elapsed_s").to_number<double>() >= 2.0);

  const auto& ops = obj(s, "ops");
  CHECK(num(obj(ops, "LOGIN").at("requests")) >= 2000);  // every user logged in first
  CHECK(num(obj(ops, "HEARTBEAT").at("requests")) > 0);
  CHECK(num(obj(ops, "LOOKUP").at("requests")) > 0);
  CHECK(num(obj(ops, "LOGOUT").at("requests")) > 0);
  CHECK(num(obj(obj(ops, "LOGIN"), "status").at("OK")) == num(obj(ops, "LOGIN").at("replies")));
  CHECK(num(s.at("no_reply")) == 0);
  CHECK(num(s.at("mismatched_replies")) == 0);
  CHECK(num(s.at("malformed_replies")) == 0);
  CHECK(num(s.at("amplified_replies")) == 0);

  const auto& v = obj(s, "verify");
  CHECK(v.at("result").as_string() == "pass");
  CHECK(num(v.at("verified_ok")) > 1000);
  CHECK(num(v.at("verify_failed")) == 0);
  CHECK(num(v.at("echo_checked")) > 2000);
  CHECK(v.at("failures").as_array().empty());

  // What the server saw agrees with what udp_sim says it sent.
  const uint64_t sent = num(s.at("requests")) + num(s.at("retries_sent"));
  CHECK(server.received() <= sent);
  CHECK(server.received() >= num(s.at("replies")));
  CHECK(server.store().size() > 1500);  // mostly logged in
  CHECK(server.store().size() <= 2000);
  for (const auto& [id, ep] : server.store()) {
    REQUIRE(id >= 100000);
    REQUIRE(id < 102000);
  }
}

TEST_CASE("udp_sim: a server answering a wrong endpoint for some users fails --verify (exit 1)") {
  Faults faults;
  faults.wrong_endpoint = [](uint64_t id) { return id % 97 == 0; };
  FakeLoginServer server(faults);
  const SimRun run = run_against(server, {"--users", "1000", "--duration", "1", "--verify"}, 1);
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  const auto& v = obj(s, "verify");
  CHECK(v.at("result").as_string() == "fail");
  CHECK(num(v.at("verify_failed")) > 0);
  CHECK(num(v.at("verified_ok")) > 0);  // the other users are fine
  const auto& failures = v.at("failures").as_array();
  REQUIRE_FALSE(failures.empty());
  CHECK(failures.size() <= 10);
  for (const auto& f : failures) {
    const auto& o = f.as_object();
    CHECK(num(o.at("user")) % 97 == 0);
    CHECK(o.at("op").as_string() == "LOOKUP");
    CHECK(o.at("expected").as_string() != o.at("got").as_string());
  }
  CHECK(s.at("exit_code").to_number<int>() == 1);
}

TEST_CASE("udp_sim: lost datagrams are retried with the same request_id and bytes") {
  Faults faults;
  faults.drop_first_of_every = 5;
  FakeLoginServer server(faults);
  const SimRun run = run_against(server, {"--users", "300", "--duration", "1", "--verify",
                                          "--timeout-ms", "30", "--window", "16"});
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  CHECK(server.dropped() > 10);
  CHECK(num(s.at("retries_sent")) >= server.resent_same());
  CHECK(server.resent_same() > 0);
  CHECK(server.resent_same() + num(s.at("abandoned")) >= server.dropped());
  CHECK(server.resent_different() == 0);
  CHECK(num(s.at("no_reply")) == 0);
  CHECK(obj(s, "verify").at("result").as_string() == "pass");
}

TEST_CASE("udp_sim: amplified answers are counted and fail --verify") {
  Faults faults;
  faults.amplify = true;
  FakeLoginServer server(faults);
  const SimRun run = run_against(server, {"--users", "200", "--duration", "1", "--verify"}, 1);
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  CHECK(num(s.at("amplified_replies")) > 0);
  CHECK(obj(s, "verify").at("result").as_string() == "fail");
}

TEST_CASE("udp_sim: --observed registers the sockets' own addresses") {
  FakeLoginServer server;
  const SimRun run = run_against(
      server, {"--users", "500", "--duration", "1", "--verify", "--observed", "--sockets", "3"});
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  CHECK(obj(s, "verify").at("result").as_string() == "pass");
  CHECK(num(obj(s, "verify").at("echo_checked")) >= 500);
  std::unordered_set<uint16_t> ports;
  for (const auto& [id, ep] : server.store()) {
    CHECK(ep.family == 4);
    CHECK(ep.v4_host_order() == 0x7f000001u);
    ports.insert(ep.port);
  }
  CHECK(ports.size() == 3);
}

TEST_CASE("udp_sim: open loop sends on its schedule, sleeping or busy-waiting") {
  for (const bool busy_wait : {false, true}) {
    CAPTURE(busy_wait);
    FakeLoginServer server;
    std::vector<std::string> args = {"--users", "100",  "--duration", "1",
                                     "--rate",  "2000", "--verify"};
    if (busy_wait) args.push_back("--busy-wait");
    const SimRun run = run_against(server, args);
    const auto& s = run.summary;
    CAPTURE(boost::json::serialize(s));
    CHECK(s.at("mode").as_string() == "open");
    // Requests due in [start, start + 1 s): exactly 2000, sent or (if the machine stalled) unsent.
    CHECK(num(s.at("requests")) + num(s.at("unsent")) == 2000);
    CHECK(num(s.at("requests")) >= 1900);
    CHECK(obj(s, "verify").at("result").as_string() == "pass");
  }
}

TEST_CASE("udp_sim: --warmup leaves the warm-up's requests out of every figure") {
  FakeLoginServer server;
  const SimRun run = run_against(server, {"--users", "1000", "--warmup", "1", "--duration", "1",
                                          "--rate", "2000", "--verify"});
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  // Only the measured second's 2000 requests count; the server saw both seconds'.
  CHECK(num(s.at("requests")) + num(s.at("unsent")) == 2000);
  CHECK(server.received() >= 3800);
  // The 1000 users' first LOGINs went out in the warm-up: the figures hold only re-logins after
  // LOGOUTs (about 5% of 2000), and --verify, which tracks the warm-up too, judges the LOOKUPs.
  CHECK(num(obj(obj(s, "ops"), "LOGIN").at("requests")) < 500);
  CHECK(obj(s, "verify").at("result").as_string() == "pass");
  // elapsed_s leaves the warm-up out: pinned with chosen times in the unit test of RunPhases; here
  // only that the measured part ran to its end.
  CHECK(s.at("warmup_s").to_number<double>() == 1.0);
  CHECK(s.at("elapsed_s").to_number<double>() >= 1.0);
}

TEST_CASE("udp_sim: --echo takes a bare echo server's copies as OK answers") {
  Faults faults;
  faults.echo = true;
  FakeLoginServer server(faults);
  const SimRun run = run_against(server, {"--users", "500", "--duration", "1", "--echo"});
  const auto& s = run.summary;
  CAPTURE(boost::json::serialize(s));
  CHECK(num(s.at("replies")) > 0);
  CHECK(num(obj(s, "status").at("OK")) == num(s.at("replies")));
  CHECK(num(s.at("malformed_replies")) == 0);
  CHECK(num(s.at("mismatched_replies")) == 0);
  CHECK(num(s.at("amplified_replies")) == 0);
}

TEST_CASE("udp_sim: no server at the target exits 69") {
  // A port that was free a moment ago: nothing listens there.
  uint16_t port = 0;
  const int fd = bind_loopback(SOCK_DGRAM, port);
  REQUIRE(fd >= 0);
  close(fd);
  const SimRun run = run_json({"--target", "127.0.0.1:" + std::to_string(port), "--users", "10",
                               "--duration", "1", "--timeout-ms", "50"},
                              30s);
  CHECK(run.exit_code == 69);
  CHECK(num(run.summary.at("replies")) == 0);
  CHECK(num(run.summary.at("requests")) > 0);
}

TEST_CASE("udp_sim: bad command lines exit 64 at once") {
  const std::vector<std::vector<std::string>> bad = {
      {"--target", "127.0.0.1:9", "--users", "10", "--rate", "100", "--window", "8"},
      {"--target", "127.0.0.1:9", "--users", "0"},
      {"--target", "no.such.host.invalid:9", "--users", "10"},
      {"--target", "127.0.0.1", "--users", "10"},
      {"--target", "127.0.0.1:9", "--users", "10", "--mix", "lookup=1,ping=2"},
      {"--target", "127.0.0.1:9", "--users", "10", "--duration", "0"},
      {"--target", "127.0.0.1:9", "--users", "10", "--warmup", "-1"},
      {"--target", "127.0.0.1:9", "--users", "10", "--echo", "--verify"},
      {"--target", "127.0.0.1:9", "--users", "10", "--history", "h.txt", "--observed"},
      {"--target", "127.0.0.1:9", "--users", "10", "--history", "h.txt", "--echo"},
      {"--target", "127.0.0.1:9", "--users", "10", "--history-client", "1"},
      {"--target", "127.0.0.1:9", "--users", "10", "--history", "h.txt", "--history-client",
       "65536"},
      {"--target", "127.0.0.1:9", "--users", "10", "--history", "/nonexistent/dir/h.txt"},
      {"--users", "10"},
  };
  for (const auto& args : bad) {
    std::string command_line;
    for (const auto& a : args) command_line += a + " ";
    CAPTURE(command_line);
    ChildProcess sim(IMHASH_UDP_SIM, args);
    CHECK(wait_exit(sim, 15s) == 64);
  }
}

TEST_CASE("udp_sim: SIGINT ends the run early and still prints the summary") {
  FakeLoginServer server;
  ChildProcess sim(IMHASH_UDP_SIM,
                   {"--target", server.address(), "--users", "100", "--duration", "120"});
  const std::string progress = sim.wait_for_line("done ", 20s);  // the first progress line
  CHECK(progress.find("p99") != std::string::npos);
  CHECK(sim.stop(SIGINT, 10s) == 0);
  // The summary is still in the pipe.
  CHECK(sim.wait_for_line("elapsed", 5s).find("(interrupted)") != std::string::npos);
  CHECK(sim.wait_for_line("LOOKUP", 5s).find("OK=") != std::string::npos);
  sim.wait_for_line("verify: off", 5s);
}

// A measurement, not a test: run by hand with
//   integration_tests --no-skip -tc='udp_sim: closed-loop throughput*'
TEST_CASE("udp_sim: closed-loop throughput against the fake server" * doctest::skip()) {
  FakeLoginServer server;
  const SimRun run = run_json(
      {"--target", server.address(), "--users", "100000", "--duration", "3", "--window", "64"},
      60s);
  const auto& s = run.summary;
  MESSAGE("requests_per_s " << s.at("requests_per_s").to_number<double>() << ", p50 "
                            << num(obj(s, "latency_us").at("p50")) << " us, p99 "
                            << num(obj(s, "latency_us").at("p99")) << " us");
  CHECK(run.exit_code == 0);
}
