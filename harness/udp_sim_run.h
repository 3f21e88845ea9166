// Runs of the real udp_sim and its --json summary, parsed: the one reader of that summary (written
// by tools/udp_sim/report.cpp summary_json) for the integration tests and the benchmark driver.
// UdpSimSummary is plain data (copy it freely, any thread); a UdpSim is used from one thread.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/binaries.h"
#include "harness/child_process.h"

namespace imhash::test {

// Long enough for the longest load a test runs, in a sanitizer build on a loaded machine.
inline constexpr std::chrono::milliseconds kUdpSimPatience = std::chrono::seconds(240);

struct UdpSimLatency {  // microseconds
  uint64_t count = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
  double mean = 0;
};

struct UdpSimOp {  // one request type: LOGIN, HEARTBEAT, LOOKUP, LOGOUT
  uint64_t requests = 0, retries = 0, replies = 0, no_reply = 0, abandoned = 0;
  std::map<std::string, uint64_t> status;  // every status udp_sim knows, by name ("OK", ...)
  UdpSimLatency latency_us;
  // status.at(name); throws std::runtime_error naming an unknown status.
  uint64_t count(std::string_view status_name) const;
};

struct UdpSimVerify {
  bool enabled = false;
  std::string result;  // "pass", "fail", "nothing_verified", "off"
  uint64_t verified_ok = 0, verify_failed = 0, unjudged = 0, echo_checked = 0;
  boost::json::array failures;  // {user, op, expected, got}, as udp_sim lists them
  bool passed() const { return result == "pass"; }
};

struct UdpSimSummary {
  boost::json::object json;  // all of it, for what has no field here (the settings, ...)
  uint64_t requests = 0, retries_sent = 0, replies = 0, no_reply = 0, abandoned = 0, unsent = 0;
  double requests_per_s = 0;  // replies per second of the run
  double elapsed_s = 0;
  bool interrupted = false;
  std::map<std::string, uint64_t> status;  // over every op
  std::map<std::string, UdpSimOp> ops;
  UdpSimLatency latency_us;  // over every op
  uint64_t late_replies = 0, mismatched_replies = 0, malformed_replies = 0, amplified_replies = 0;
  uint64_t refused = 0, send_errors = 0, recv_errors = 0;
  UdpSimVerify verify;
  int exit_code = -1;  // the one udp_sim says it exits with

  // status.at(name); throws std::runtime_error naming an unknown status.
  uint64_t count(std::string_view status_name) const;
  // ops.at(name); throws std::runtime_error naming an unknown op.
  const UdpSimOp& op(std::string_view name) const;
  std::string text() const { return boost::json::serialize(json); }

  // Parses one summary object; throws std::runtime_error if it is not one (a missing field too).
  static UdpSimSummary parse(std::string_view json_text);
};

struct UdpSimOptions {
  std::string udp_sim = Binaries::built_in().udp_sim;  // the binary (another build: an A/B)
  std::string name = "udp_sim";  // its stderr (progress lines) goes to RunLogs::path(name)
  std::string netns{};           // set: it runs in this network namespace (harness/netns.h)
  std::vector<std::string> env{};
};

// One udp_sim run, started at construction with `args` (plus --json if they lack it).
class UdpSim {
 public:
  explicit UdpSim(std::vector<std::string> args, UdpSimOptions options = {});
  // Waits (bounded) for udp_sim to print its summary and exit; returns the summary (exit_code()
  // then says how it exited). Throws std::runtime_error with the end of its stdout and of its
  // stderr log if no summary comes within `timeout`, or it is not one.
  UdpSimSummary wait(std::chrono::milliseconds timeout = kUdpSimPatience);
  // SIGINT: udp_sim ends the run now and prints its summary (collect it with wait()).
  void interrupt();
  int exit_code() const { return exit_code_; }  // -1 until wait() returned
  ChildProcess& process() { return *process_; }

 private:
  std::unique_ptr<ChildProcess> process_;
  int exit_code_ = -1;
};

// The summary of a `udp_sim --json` started as a plain ChildProcess: reads its stdout (bounded)
// until udp_sim closes it, and parses the summary line. Leaves reaping the process to the caller
// (stop(0) gives its exit status). Throws as UdpSim::wait.
UdpSimSummary read_udp_sim_summary(ChildProcess& sim,
                                   std::chrono::milliseconds timeout = kUdpSimPatience);

}  // namespace imhash::test
