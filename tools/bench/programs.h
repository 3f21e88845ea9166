// Programs the scenarios run beside our daemons, through the harness's ChildProcess: any program
// run to its end with its output, redis-server (the comparison of `hash` and `memory`) and the
// yardstick udp_limit (../shared/bench/udp_limit.c, e2e and latency). Every start waits for an
// event that says the program is ready (a line, an answer), with a bound; none sleeps a guessed
// time. Main thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/child_process.h"

namespace imhash::bench {

// From now on a SIGINT, SIGTERM or SIGHUP to the driver kills its children (every daemon and load
// it started) before it exits 128+signal: the harness kills them when its objects die, which an
// exit on a signal skips. Call once, from main().
void kill_children_on_signal();

// `name` found on PATH (as a shell would), or `name` itself if it holds a '/'; throws if absent.
std::string which(const std::string& name);

struct Output {
  int exit_code = -1;
  std::string out;  // stdout (stderr goes to the log named in run_program's call)
};

// Runs `path` with `args` to its end (killed, and a throw, after `bound`).
Output run_program(const std::string& path, std::vector<std::string> args,
                   std::chrono::milliseconds bound, const std::string& stderr_log = "");
// The same, failing (std::runtime_error with the output's start) unless it exits 0.
std::string run_ok(const std::string& path, std::vector<std::string> args,
                   std::chrono::milliseconds bound, const std::string& stderr_log = "");

// One of our daemons (or any program that prints "listening on ADDRESS" lines), started and
// listening: its first `listeners` addresses. It is killed when the object goes.
struct Daemon {
  std::unique_ptr<test::ChildProcess> process;
  std::vector<std::string> addresses;
  pid_t pid() const { return process->pid(); }
};
Daemon start_daemon(const std::string& path, std::vector<std::string> args, size_t listeners = 1);

// A TCP or UDP port on loopback that was free a moment ago, for programs that cannot take port 0
// (redis-server, udp_limit).
uint16_t free_port(int type);

// The resident set of process `pid`, bytes (/proc/PID/status VmRSS).
uint64_t rss_bytes(pid_t pid);
// The CPU time process `pid` has used so far, all its threads, user and system, seconds
// (/proc/PID/stat); 0 for a process that is gone.
double cpu_seconds(pid_t pid);

// redis-server on 127.0.0.1, no persistence, started and ready ("Ready to accept connections").
class Redis {
 public:
  explicit Redis(std::vector<std::string> extra_args = {});
  // redis-cli -p PORT ARGS..., its output; throws if it fails.
  std::string cli(std::vector<std::string> args,
                  std::chrono::milliseconds bound = std::chrono::minutes(10));
  // Its resident set, bytes.
  uint64_t rss();
  uint16_t port() const { return port_; }

 private:
  uint16_t port_ = 0;
  std::unique_ptr<test::ChildProcess> child_;
};

// ../shared/bench/udp_limit.c beside the repository `source_dir` (or beside one of its parents:
// a git worktree may sit below the main checkout's folder); "" if none is found.
std::string find_yardstick(const std::string& source_dir);

// The yardstick: ../shared/bench/udp_limit.c compiled with cc -O2 into the work directory.
class UdpLimit {
 public:
  // Compiles `source` into `dir`/udp_limit (once per process).
  UdpLimit(const std::string& source, const std::string& dir);
  // Its client against its echo server for `seconds` (window 64, 48-byte datagrams, as bench.sh
  // ran it): round trips per second. Starts and stops the echo server around it.
  double round_trips_per_s(double seconds, int window = 64, int size = 48);
  // The bare echo server, answering (a probe datagram came back) on 127.0.0.1:port().
  class Echo {
   public:
    explicit Echo(const std::string& binary);
    uint16_t port() const { return port_; }

   private:
    uint16_t port_ = 0;
    std::unique_ptr<test::ChildProcess> child_;
  };
  const std::string& binary() const { return binary_; }

 private:
  std::string binary_;
};

}  // namespace imhash::bench
