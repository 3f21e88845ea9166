#include "harness/etcd_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>

#include "harness/http_get.h"
#include "harness/log_file.h"
#include "harness/loopback.h"
#include "harness/netns_enter.h"
#include "harness/run_logs.h"
#include "harness/wait_until.h"

namespace imhash::test {

namespace {

constexpr auto kHealthPoll = std::chrono::milliseconds(100);  // between GET /health polls
constexpr int kStartAttempts = 3;  // fresh ports each: another program may take a picked one first
constexpr uint16_t kLowestPort = 10000;
// etcd's own ports, used on a host (a namespace of its own); a second member on the same address
// takes the next two, and so on.
constexpr uint16_t kHostClientPort = 2379;
constexpr uint16_t kHostPeerPort = 2380;

// Whether 127.0.0.1:port can be bound now (without SO_REUSEADDR: a port with connections in
// TIME_WAIT counts as taken too, which etcd, with SO_REUSEADDR, would not mind).
bool bindable(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const sockaddr_in a = loopback_address(port);
  const bool ok = bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// The first port of the kernel's ephemeral range (what bind to port 0 and connect() hand out).
uint16_t ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return static_cast<uint16_t>(std::clamp(low, 1, 65535));
}

// `count` distinct ports free on 127.0.0.1 now. Taken at random below the ephemeral range, so that
// while a member is down nothing of another test (all bind port 0) gets its port; from the
// ephemeral range (bind to port 0) only if the machine leaves no room below it.
std::vector<uint16_t> free_ports(size_t count) {
  std::vector<uint16_t> ports;
  const uint16_t low = ephemeral_low();
  if (low > kLowestPort + 1000) {
    std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> pick(kLowestPort, low - 1);
    for (int tries = 0; ports.size() < count && tries < 10000; ++tries) {
      const auto port = static_cast<uint16_t>(pick(rng));
      if (std::find(ports.begin(), ports.end(), port) == ports.end() && bindable(port)) {
        ports.push_back(port);
      }
    }
  }
  std::vector<int> held;  // kept open until all are picked, so the kernel gives distinct ones
  while (ports.size() < count) {
    uint16_t port = 0;
    const int fd = bind_loopback(SOCK_STREAM | SOCK_CLOEXEC, port);
    if (fd < 0) break;
    held.push_back(fd);
    ports.push_back(port);
  }
  for (const int fd : held) close(fd);
  if (ports.size() < count) throw std::runtime_error("EtcdCluster: no free loopback ports");
  return ports;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return "exited with status " + std::to_string(code) +
           (code == 127 ? " (the binary could not be run)" : "");
  }
  if (WIFSIGNALED(status)) return "died of signal " + std::to_string(WTERMSIG(status));
  return "stopped (wait status " + std::to_string(status) + ")";
}

// The environment for etcd: the test's, without ETCD_* variables (etcd reads its flags from them
// too, and a stray one would change the cluster under the test).
std::vector<std::string> etcd_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::string_view(*e).substr(0, 5) != "ETCD_") env.emplace_back(*e);
  }
  return env;
}

// Removes what clusters of test processes that are gone left in the temporary directory (a test
// binary killed by ctest's timeout runs no destructor): 128 MB a member, etcd's preallocated WAL.
void remove_stale_dirs() {
  const std::string prefix = "imhash_etcd_";
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

EtcdCluster::EtcdCluster(size_t members) : EtcdCluster(EtcdClusterOptions{.members = members}) {}

EtcdCluster::EtcdCluster(EtcdClusterOptions options) {
  if (options.members == 0) throw std::invalid_argument("EtcdCluster: at least one member");
  if (!options.hosts.empty() && options.hosts.size() != options.members) {
    throw std::invalid_argument("EtcdCluster: " + std::to_string(options.hosts.size()) +
                                " hosts for " + std::to_string(options.members) + " members");
  }
  for (const EtcdMemberHost& h : options.hosts) {
    if (h.netns.empty() != h.address.empty()) {
      throw std::invalid_argument("EtcdCluster: a member's host needs both netns and address");
    }
  }
  on_hosts_ = !options.hosts.empty() && !options.hosts[0].netns.empty();
  for (const EtcdMemberHost& h : options.hosts) {
    if (h.netns.empty() == on_hosts_) {
      throw std::invalid_argument(
          "EtcdCluster: members on loopback cannot reach members on hosts (all or none)");
    }
  }
  const char* binary = std::getenv("IMHASH_ETCD");
  etcd_ = binary != nullptr && *binary != '\0' ? binary : "/usr/bin/etcd";
  if (access(etcd_.c_str(), X_OK) != 0) {
    throw std::runtime_error("EtcdCluster: " + etcd_ +
                             " is not an executable (install etcd-server, or set IMHASH_ETCD)");
  }
  remove_stale_dirs();
  static std::atomic<unsigned> clusters{0};  // several clusters in one test process
  dir_ = std::make_unique<TempDir>("etcd", std::to_string(clusters++));
  log_stem_ = RunLogs::fresh_name("etcd");
  std::filesystem::create_directories(dir_->path);
  members_.resize(options.members);
  for (size_t i = 0; i < members_.size(); ++i) {
    members_[i].netns = on_hosts_ ? options.hosts[i].netns : "";
    members_[i].host = on_hosts_ ? options.hosts[i].address : "127.0.0.1";
  }
  for (int attempt = 1;; ++attempt) {
    configure();
    try {
      for (size_t i = 0; i < members_.size(); ++i) start(i);
      // One wait for all: a member that exits (a port taken after all) ends it at once.
      const bool up = wait_until(
          [&] {
            for (size_t i = 0; i < members_.size(); ++i) {
              if (!running(i)) throw std::runtime_error(failure(i, "did not start"));
            }
            for (size_t i = 0; i < members_.size(); ++i) {
              if (!healthy(i)) return false;
            }
            return true;
          },
          kPatience, kHealthPoll);
      if (!up) {
        for (size_t i = 0; i < members_.size(); ++i) {
          if (!healthy(i))
            throw std::runtime_error(
                failure(i, "is not healthy after " + std::to_string(kPatience.count()) + " ms"));
        }
      }
      return;
    } catch (const std::exception&) {
      bool port_taken = false;
      for (size_t i = 0; i < members_.size(); ++i) {
        port_taken |=
            file_text(members_[i].log).find("address already in use") != std::string::npos;
      }
      kill_all();
      if (!port_taken || attempt == kStartAttempts) throw;
    }
  }
}

EtcdCluster::~EtcdCluster() { kill_all(); }

void EtcdCluster::configure() {
  std::vector<uint16_t> ports;
  if (on_hosts_) {
    for (size_t i = 0; i < members_.size(); ++i) {
      const auto before =
          std::count_if(members_.begin(), members_.begin() + i,
                        [&](const Member& m) { return m.host == members_[i].host; });
      ports.push_back(static_cast<uint16_t>(kHostClientPort + 2 * before));
      ports.push_back(static_cast<uint16_t>(kHostPeerPort + 2 * before));
    }
  } else {
    ports = free_ports(2 * members_.size());
  }
  static std::atomic<unsigned> configured{0};
  token_ = "imhash-" + std::to_string(getpid()) + "-" + std::to_string(configured++) + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  initial_cluster_.clear();
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    m.name = "m" + std::to_string(i);
    m.client_port = ports[2 * i];
    m.peer_port = ports[2 * i + 1];
    m.data_dir = dir_->path + "/" + m.name;
    m.log = RunLogs::path(log_stem_ + "." + m.name);
    m.wait_status = -1;
    std::filesystem::remove_all(m.data_dir);
    std::filesystem::remove(m.log);
    if (i > 0) initial_cluster_ += ',';
    initial_cluster_ += m.name + "=http://" + m.host + ":" + std::to_string(m.peer_port);
  }
}

void EtcdCluster::start(size_t i) {
  if (running(i)) throw std::logic_error("EtcdCluster: member " + member(i).name + " is running");
  Member& m = members_[i];
  const std::string client = "http://" + client_address(i);
  const std::string peer = "http://" + m.host + ":" + std::to_string(m.peer_port);
  // On a restart the data dir exists and etcd ignores the --initial-* flags.
  std::vector<std::string> args = {
      etcd_,
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=" + initial_cluster_,
      "--initial-cluster-token=" + token_,
      "--initial-cluster-state=new",
      // etcd's defaults, said here: a leader is elected about a second after a start or after
      // the leader's death.
      "--heartbeat-interval=100",
      "--election-timeout=1000",
      // A member that comes back (or lost its peers) asks before it campaigns, so it neither
      // deposes a working leader nor drives the term up while it is alone.
      "--pre-vote=true",
      "--logger=zap",
      "--log-outputs=stderr",
  };
  {
    std::ofstream log(m.log, std::ios::app);
    log << "=== EtcdCluster: starting " << m.name << " (client " << client << ", peer " << peer
        << ", cluster " << token_ << ")"
        << (m.netns.empty() ? "" : " in network namespace " + m.netns) << " ===\n";
  }
  // Everything the child needs is made before fork(): it only makes system calls.
  std::vector<std::string> env = etcd_environment();
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int netns_fd = m.netns.empty() ? -1 : open_netns(m.netns);
  const int log_fd = open(m.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    if (netns_fd >= 0) close(netns_fd);
    throw std::runtime_error("EtcdCluster: cannot open " + m.log);
  }
  static constexpr char kNoNetns[] = "EtcdCluster: setns into the network namespace failed\n";
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    if (netns_fd >= 0) close(netns_fd);
    throw std::runtime_error("EtcdCluster: fork failed");
  }
  if (pid == 0) {
    // Dies with the test (even one killed by ctest's timeout); if the test is already gone, now.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (netns_fd >= 0 && !enter_netns(netns_fd)) {
      [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, kNoNetns, sizeof kNoNetns - 1);
      _exit(126);
    }
    close_range(3, ~0U, 0);  // none of the test's sockets go to etcd
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
  if (netns_fd >= 0) close(netns_fd);
  m.pid = pid;
  m.wait_status = -1;
}

bool EtcdCluster::running(size_t i) {
  Member& m = members_.at(i);
  if (m.pid <= 0) return false;
  int status = 0;
  if (waitpid(m.pid, &status, WNOHANG) == 0) return true;
  m.wait_status = status;
  m.pid = -1;
  return false;
}

const EtcdCluster::Member& EtcdCluster::member(size_t i) const { return members_.at(i); }

size_t EtcdCluster::size() const { return members_.size(); }

std::string EtcdCluster::client_address(size_t i) const {
  return member(i).host + ":" + std::to_string(member(i).client_port);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) out += ',';
    out += client_address(i);
  }
  return out;
}

void EtcdCluster::kill(size_t i) {
  Member& m = members_.at(i);
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  int status = 0;
  while (waitpid(m.pid, &status, 0) < 0 && errno == EINTR) {
  }
  m.wait_status = status;
  m.pid = -1;
}

void EtcdCluster::restart(size_t i) { start(i); }

void EtcdCluster::kill_all() {
  for (size_t i = 0; i < members_.size(); ++i) kill(i);
}

void EtcdCluster::restart_all() {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!running(i)) start(i);
  }
}

bool EtcdCluster::healthy(size_t i) {
  if (!running(i)) return false;
  const HttpReply reply =
      in_netns(member(i).netns, [&] { return http_get(client_address(i), "/health"); });
  return reply.status == 200 && reply.body.find("\"health\":\"true\"") != std::string::npos;
}

size_t EtcdCluster::raft_leader() {
  std::optional<size_t> found;
  const bool agreed = wait_until(
      [&] {
        // Every running member's view: its own id and the leader's (uint64 as JSON strings).
        std::vector<std::string> ids(members_.size());
        std::optional<std::string> leader;
        for (size_t i = 0; i < members_.size(); ++i) {
          if (!running(i)) continue;
          const HttpReply r = in_netns(member(i).netns, [&] {
            return http_post(client_address(i), "/v3/maintenance/status", "{}");
          });
          if (r.status != 200) return false;
          const boost::json::value v = boost::json::parse(r.body);
          ids[i] = boost::json::value_to<std::string>(v.at("header").at("member_id"));
          const std::string l = boost::json::value_to<std::string>(v.at("leader"));
          if (leader && *leader != l) return false;
          leader = l;
        }
        for (size_t i = 0; i < members_.size(); ++i) {
          if (leader && ids[i] == *leader) found = i;
        }
        return found.has_value();
      },
      std::chrono::seconds(30), kHealthPoll);
  if (!agreed) throw std::runtime_error("the etcd members do not agree on a raft leader");
  return *found;
}

void EtcdCluster::wait_healthy(size_t i, std::chrono::milliseconds timeout) {
  const bool up = wait_until(
      [&] {
        if (!running(i)) throw std::runtime_error(failure(i, "is not running"));
        return healthy(i);
      },
      timeout, kHealthPoll);
  if (!up) {
    throw std::runtime_error(
        failure(i, "is not healthy after " + std::to_string(timeout.count()) + " ms"));
  }
}

void EtcdCluster::wait_quorum(std::chrono::milliseconds timeout) {
  const size_t majority = members_.size() / 2 + 1;
  const bool up = wait_until(
      [&] {
        size_t n = 0;
        for (size_t i = 0; i < members_.size(); ++i) n += healthy(i) ? 1 : 0;
        return n >= majority;
      },
      timeout, kHealthPoll);
  if (up) return;
  std::string message = "EtcdCluster: no majority (" + std::to_string(majority) + " of " +
                        std::to_string(members_.size()) + ") healthy after " +
                        std::to_string(timeout.count()) + " ms";
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!healthy(i)) message += "\n" + failure(i, running(i) ? "is not healthy" : "is not running");
  }
  throw std::runtime_error(message);
}

std::string EtcdCluster::log_tail(size_t i) const {
  return tail_of_file(member(i).log, kTailLines);
}

std::string EtcdCluster::failure(size_t i, const std::string& what) const {
  const Member& m = member(i);
  std::string text = "etcd member " + m.name + " (client " + client_address(i) + ", peer " +
                     m.host + ":" + std::to_string(m.peer_port) +
                     (m.netns.empty() ? "" : ", in network namespace " + m.netns) + ") " + what;
  if (m.pid <= 0 && m.wait_status >= 0) text += " (" + describe_exit(m.wait_status) + ")";
  return text + "; the end of its log:\n" + log_tail(i);
}

}  // namespace imhash::test
