// ChildProcess: runs one of our binaries for an integration test, waits for its
// "listening on ADDRESS" lines, and always kills it (SIGKILL if SIGTERM is not enough) when the
// object dies, so a failing test never leaves a server behind. Used from the test's thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace imhash::test {

struct ChildOptions {
  std::vector<std::string> env{};  // "NAME=VALUE" added to (or replacing in) the test's environment
  std::string stderr_log{};  // default: PROGRAM.stderr.log, shared by the tests of a directory
};

class ChildProcess {
 public:
  // Starts `path` with `args`; stdout is captured, stderr goes to a log file (by default named
  // after the program, in the test's working directory; kept for post-mortems).
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

 private:
  // Appends what the child writes next to buffered_; false once it closed its stdout. Throws
  // `timeout_error` past `deadline`.
  bool read_more(std::chrono::steady_clock::time_point deadline, const char* timeout_error);
  std::string read_line(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  int exit_status_ = -1;
};

// "127.0.0.1:7000" -> port 7000.
uint16_t port_of(const std::string& address);

}  // namespace imhash::test
