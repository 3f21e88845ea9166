#include "harness/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "harness/netns_enter.h"
#include "harness/run_logs.h"

namespace imhash::test {

namespace {

// "13:22:36.123", local time: to match a start line with the daemons' own log lines.
std::string clock_text() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms));
  return buf;
}

}  // namespace

ChildProcess::ChildProcess(const std::string& path, std::vector<std::string> args,
                           ChildOptions options) {
  const std::string program = path.substr(path.rfind('/') + 1);
  const bool own_log = options.stderr_log.empty();
  if (own_log) {
    log_ = RunLogs::path(options.name.empty() ? program : options.name);
    std::ofstream mark(log_, std::ios::app);
    mark << "=== " << clock_text() << " start " << program;
    for (const std::string& a : args) mark << ' ' << a;
    if (!options.netns.empty()) mark << " (in network namespace " << options.netns << ")";
    mark << " ===\n";
  } else {
    log_ = std::move(options.stderr_log);
    RunLogs::record(log_);
  }
  const int netns_fd = options.netns.empty() ? -1 : open_netns(options.netns);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    if (netns_fd >= 0) close(netns_fd);
    throw std::runtime_error("pipe failed");
  }
  // The environment is made before fork(): the child only calls async-signal-safe functions.
  std::vector<std::string> env = std::move(options.env);
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    const auto key = var.substr(0, var.find('=') + 1);
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& mine) {
      return std::string_view(mine).substr(0, mine.find('=') + 1) == key;
    });
    if (!replaced) env.emplace_back(var);
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  static constexpr char kNoNetns[] = "ChildProcess: setns into the network namespace failed\n";
  pid_ = fork();
  if (pid_ < 0) {
    if (netns_fd >= 0) close(netns_fd);
    close(out[0]);
    close(out[1]);
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int err = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    if (netns_fd >= 0 && !enter_netns(netns_fd)) {
      [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, kNoNetns, sizeof kNoNetns - 1);
      _exit(126);
    }
    execve(path.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  if (netns_fd >= 0) close(netns_fd);
  close(out[1]);
  stdout_fd_ = out[0];
}

ChildProcess::~ChildProcess() {
  if (running()) stop(SIGKILL);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

bool ChildProcess::read_more(std::chrono::steady_clock::time_point deadline,
                             const char* timeout_error) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error(timeout_error);
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) return false;
    buffered_.append(buf, static_cast<size_t>(n));
    return true;
  }
}

std::string ChildProcess::read_line(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    if (!read_more(deadline, "timed out waiting for output")) {
      throw std::runtime_error("child closed its output (exited?)");
    }
  }
}

std::vector<std::string> ChildProcess::wait_listening(size_t count,
                                                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> addresses;
  const std::string prefix = "listening on ";
  while (addresses.size() < count) {
    const std::string line = read_line(deadline);
    if (line.rfind(prefix, 0) == 0) addresses.push_back(line.substr(prefix.size()));
  }
  return addresses;
}

std::string ChildProcess::wait_for_line(const std::string& needle,
                                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string line = read_line(deadline);
    if (line.find(needle) != std::string::npos) return line;
  }
}

std::string ChildProcess::available_output() {
  std::string out = std::move(buffered_);
  buffered_.clear();
  for (;;) {
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return out;
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string ChildProcess::read_all(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (read_more(deadline, "timed out reading the child's output")) {
  }
  std::string out = std::move(buffered_);
  buffered_.clear();
  return out;
}

bool ChildProcess::running() {
  if (pid_ <= 0 || exit_status_ >= 0) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

bool ChildProcess::wait_exit(std::chrono::steady_clock::time_point deadline) {
  // A pidfd becomes readable when the process exits: the wait is for that event, not a poll of
  // waitpid. Without one (an old kernel) waitpid is polled.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  while (running()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (pidfd >= 0) close(pidfd);
  return !running();
}

int ChildProcess::stop(int sig, std::chrono::milliseconds timeout) {
  if (!running()) return exit_status_;
  kill(pid_, sig);
  if (!wait_exit(std::chrono::steady_clock::now() + timeout)) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_status_ = 128 + SIGKILL;
  }
  return exit_status_;
}

uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

}  // namespace imhash::test
