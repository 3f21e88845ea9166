#include "tools/bench/programs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "harness/loopback.h"
#include "harness/wait_until.h"

namespace imhash::bench {

namespace {
int signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(signal_pipe[1], &byte, 1);  // async-signal-safe; the watcher does the rest
}

// A /proc/PID/stat file's fields after the command name (which may hold spaces and parentheses),
// from the third (the state) on; "" if the process is gone.
std::string stat_after_name(const std::filesystem::path& stat_file) {
  std::ifstream in(stat_file);
  std::string stat;
  std::getline(in, stat);
  const auto close_paren = stat.rfind(')');
  return close_paren == std::string::npos ? "" : stat.substr(close_paren + 1);
}

// Every process whose parent is this one (/proc/PID/stat's fourth field).
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  const std::string self = std::to_string(getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = stat_after_name(entry.path() / "stat");
    if (stat.empty()) continue;
    std::istringstream rest(stat);
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid == self) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}
}  // namespace

void kill_children_on_signal() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) return;
  std::thread([] {
    unsigned char sig = 0;
    while (read(signal_pipe[0], &sig, 1) != 1) {
    }
    std::fprintf(stderr, "imhash_bench: signal %d: stopping what it started\n", sig);
    for (pid_t child : children()) kill(child, SIGKILL);
    _exit(128 + sig);
  }).detach();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error(name + " not found on PATH (scripts/setup.sh --bench installs it)");
}

Output run_program(const std::string& path, std::vector<std::string> args,
                   std::chrono::milliseconds bound, const std::string& stderr_log) {
  const std::string name = path.substr(path.rfind('/') + 1);
  test::ChildProcess child(
      path, std::move(args),
      test::ChildOptions{{}, stderr_log.empty() ? name + ".stderr.log" : stderr_log});
  Output o;
  try {
    o.out = child.read_all(bound);
  } catch (const std::exception&) {
    child.stop(SIGKILL);
    throw std::runtime_error(name + " did not end within " + std::to_string(bound.count() / 1000) +
                             " s");
  }
  o.exit_code = child.stop(0);
  return o;
}

std::string run_ok(const std::string& path, std::vector<std::string> args,
                   std::chrono::milliseconds bound, const std::string& stderr_log) {
  Output o = run_program(path, std::move(args), bound, stderr_log);
  if (o.exit_code != 0) {
    throw std::runtime_error(path + " exited with status " + std::to_string(o.exit_code) + ": " +
                             o.out.substr(0, 400));
  }
  return std::move(o.out);
}

Daemon start_daemon(const std::string& path, std::vector<std::string> args, size_t listeners) {
  Daemon d;
  d.process = std::make_unique<test::ChildProcess>(path, std::move(args));
  d.addresses = d.process->wait_listening(listeners);
  return d;
}

uint16_t free_port(int type) {
  uint16_t port = 0;
  const int fd = test::bind_loopback(type, port);
  if (fd < 0) throw std::runtime_error("no free port on loopback");
  close(fd);
  return port;
}

uint64_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string key; in >> key;) {
    if (key == "VmRSS:") {
      uint64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  throw std::runtime_error("cannot read the RSS of process " + std::to_string(pid));
}

double cpu_seconds(pid_t pid) {
  std::istringstream rest(stat_after_name("/proc/" + std::to_string(pid) + "/stat"));
  // utime and stime are the stat file's fields 14 and 15, in clock ticks.
  std::string skipped;
  for (int field = 3; field < 14; ++field) rest >> skipped;
  unsigned long long utime = 0, stime = 0;
  rest >> utime >> stime;
  if (!rest) return 0;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

Redis::Redis(std::vector<std::string> extra_args) : port_(free_port(SOCK_STREAM)) {
  std::vector<std::string> args = {"--port", std::to_string(port_), "--bind", "127.0.0.1", "--save",
                                   "",       "--appendonly",        "no"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  child_ = std::make_unique<test::ChildProcess>(which("redis-server"), args,
                                                test::ChildOptions{{}, "redis-server.stderr.log"});
  // redis-server logs to stdout; this line comes once it listens.
  child_->wait_for_line("Ready to accept connections", std::chrono::seconds(20));
}

std::string Redis::cli(std::vector<std::string> args, std::chrono::milliseconds bound) {
  args.insert(args.begin(), {"-p", std::to_string(port_)});
  return run_ok(which("redis-cli"), std::move(args), bound);
}

uint64_t Redis::rss() {
  // /proc, not INFO's used_memory_rss: redis refreshes that in its cron (every 100 ms), so right
  // after a small DEBUG POPULATE it still shows the RSS from before.
  return rss_bytes(child_->pid());
}

std::string find_yardstick(const std::string& source_dir) {
  namespace fs = std::filesystem;
  for (fs::path dir = fs::absolute(source_dir).lexically_normal(); dir.has_relative_path();
       dir = dir.parent_path()) {
    const fs::path candidate = dir.parent_path() / "shared" / "bench" / "udp_limit.c";
    if (fs::exists(candidate)) return candidate.string();
  }
  return "";
}

UdpLimit::UdpLimit(const std::string& source, const std::string& dir)
    : binary_(dir + "/udp_limit") {
  if (!std::filesystem::exists(source)) {
    throw std::runtime_error("the yardstick " + source + " is missing (shared/ beside the repo)");
  }
  if (!std::filesystem::exists(binary_)) {
    run_ok(which("cc"), {"-O2", "-o", binary_, source}, std::chrono::minutes(2));
  }
}

UdpLimit::Echo::Echo(const std::string& binary) : port_(free_port(SOCK_DGRAM)) {
  child_ = std::make_unique<test::ChildProcess>(
      binary, std::vector<std::string>{"server", std::to_string(port_)},
      test::ChildOptions{{}, "udp_limit.stderr.log"});
  // It prints nothing when ready: it is ready when a datagram sent to it comes back.
  const int fd = test::connect_loopback(SOCK_DGRAM, port_);
  if (fd < 0) throw std::runtime_error("cannot reach udp_limit's port");
  const timeval tv{0, 20000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const bool answered = test::wait_until(
      [&] {
        char probe[8] = "probe", back[8];
        (void)!send(fd, probe, sizeof probe, 0);
        return recv(fd, back, sizeof back, 0) > 0;  // waits 20 ms at most
      },
      std::chrono::seconds(10), std::chrono::milliseconds(0));
  close(fd);
  if (!answered) throw std::runtime_error("udp_limit's echo server did not answer within 10 s");
}

double UdpLimit::round_trips_per_s(double seconds, int window, int size) {
  const Echo echo(binary_);
  const std::string out =
      run_ok(binary_,
             {"client", std::to_string(echo.port()), std::to_string(seconds),
              std::to_string(window), std::to_string(size)},
             std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + 30000),
             "udp_limit.stderr.log");
  return std::stod(out);  // "123456 round trips/s (window 64, 48-byte datagrams)"
}

}  // namespace imhash::bench
