// ChildProcess: runs one of our binaries for an integration test or a benchmark, waits for its
// "listening on ADDRESS" lines, and always kills it (SIGKILL if SIGTERM is not enough) when the
// object dies, so a failing test never leaves a server behind. Its stderr goes to a log file of
// the current run (harness/run_logs.h) named after the child, and it may run inside a network
// namespace (harness/netns.h). One object is used from one thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace imhash::test {

struct ChildOptions {
  std::vector<std::string> env{};  // "NAME=VALUE" added to (or replacing in) the test's environment
  // Set: stderr goes to exactly this file (appended to, nothing else written into it: tests read
  // such files line by line). Recorded with RunLogs either way.
  std::string stderr_log{};
  // Which child this is ("hash1", "login1", "cfg0"): without `stderr_log`, stderr goes to
  // RunLogs::path(name) (default: the program's file name), where each start first writes one
  // "=== start ... ===" line, so that a restarted server's log says where each life began.
  std::string name{};
  // Set: the child runs in the network namespace of that name (/run/netns/NAME, as `ip netns`
  // makes them; entered with setns(2) after fork, so it needs CAP_SYS_ADMIN).
  std::string netns{};
};

class ChildProcess {
 public:
  // Starts `path` with `args`; stdout is captured, stderr goes to the log file the options say.
  // Throws std::runtime_error if the process cannot be made (or the namespace opened).
  ChildProcess(const std::string& path, std::vector<std::string> args, ChildOptions options = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Waits for `count` "listening on" lines; returns their addresses, or throws on exit/timeout.
  std::vector<std::string> wait_listening(
      size_t count = 1, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Reads stdout lines until one contains `needle` (or throws on timeout / exit).
  std::string wait_for_line(const std::string& needle,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // What the child has written to stdout and this object has not read yet, without waiting.
  std::string available_output();
  // Reads the rest of stdout until the child closes it (bounded); returns it.
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Sends `sig` and waits for the exit; returns the exit status (128+signal if killed).
  int stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool running();
  pid_t pid() const { return pid_; }
  // The file its stderr goes to.
  const std::string& log_path() const { return log_; }

 private:
  // Appends what the child writes next to buffered_; false once it closed its stdout. Throws
  // `timeout_error` past `deadline`.
  bool read_more(std::chrono::steady_clock::time_point deadline, const char* timeout_error);
  std::string read_line(std::chrono::steady_clock::time_point deadline);

  // Waits (bounded) for the child to exit and reaps it; false on timeout.
  bool wait_exit(std::chrono::steady_clock::time_point deadline);

  std::string log_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  int exit_status_ = -1;
};

// "127.0.0.1:7000" -> port 7000.
uint16_t port_of(const std::string& address);

}  // namespace imhash::test
