#include "harness/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace imhash::test {

ChildProcess::ChildProcess(const std::string& path, std::vector<std::string> args,
                           ChildOptions options) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const std::string name = path.substr(path.rfind('/') + 1);
  const std::string log =
      options.stderr_log.empty() ? name + ".stderr.log" : std::move(options.stderr_log);
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
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    execve(path.c_str(), argv.data(), envp.data());
    _exit(127);
  }
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

int ChildProcess::stop(int sig, std::chrono::milliseconds timeout) {
  if (!running()) return exit_status_;
  kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      exit_status_ = 128 + SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_status_;
}

uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

}  // namespace imhash::test
