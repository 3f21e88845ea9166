// lossy_relay: a UDP relay that loses and delays datagrams, a userspace stand-in for tc netem (used
// by the harness, harness/netns.h Hosts::impaired_path, on kernels without sch_netem).
//
// Clients send to --listen. Each client address gets its own upstream socket, connected to
// --target, so a reply arriving on that socket belongs to exactly that client and goes back to it
// from the --listen socket. Each direction on its own drops a datagram with probability --loss
// percent and delays the rest by --delay-ms ± --jitter-ms (uniform; the jitter may reorder, like
// netem's). Delayed datagrams wait in one min-heap ordered by due time; a single thread waits in
// epoll for the sockets, the signals (signalfd) and the next due time. Everything is bounded: at
// most --max-clients mappings (idle ones evicted after --idle-timeout-s, the least recently active
// one when full) and at most --max-queued datagrams / kMaxQueuedBytes waiting (beyond: dropped and
// counted as overflow). SIGTERM/SIGINT: one summary line on stderr, exit 0.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/codec/endpoint.h"
#include "common/runtime/options.h"

namespace po = boost::program_options;
using namespace imhash;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxQueuedBytes = 64u << 20;  // payload bytes waiting in the delay queue
constexpr int kBatch = 64;                          // datagrams read per socket per wake-up
constexpr uint64_t kListenId = 0, kSignalId = 1;    // epoll ids; client ids start at 2

struct Addr {
  sockaddr_storage ss{};
  socklen_t len = sizeof(sockaddr_storage);
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss); }
};

std::string to_string(const Addr& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&a.ss);
    inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    return format_host_port(host, ntohs(s->sin_port));
  }
  if (a.ss.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a.ss);
    inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    return format_host_port(host, ntohs(s->sin6_port));
  }
  return "?";
}

Addr resolve(const std::string& text, const std::string& what) {
  const HostPort hp = parse_host_port(text, what);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &res);
  if (rc != 0) throw UsageError(what + ": cannot resolve '" + hp.host + "': " + gai_strerror(rc));
  Addr a;
  std::memcpy(&a.ss, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  return a;
}

[[noreturn]] void throw_errno(const std::string& what) {
  throw boost::system::system_error(errno, boost::system::system_category(), what);
}

struct Params {
  Addr listen, target;
  double loss = 0;  // probability, 0..1
  double delay_us = 0, jitter_us = 0;
  uint64_t seed = 0;
  std::size_t max_clients = 4096, max_queued = 100000;
  std::chrono::milliseconds idle{30000};
};

enum Dir { kToTarget = 0, kToClient = 1 };

struct Stats {
  uint64_t received = 0, forwarded = 0, lost = 0, overflow = 0, send_failed = 0, expired = 0;
};

class Relay {
 public:
  explicit Relay(const Params& p) : p_(p), rng_(p.seed), buf_(65536) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) throw_errno("sigprocmask");
    signal_fd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd_ < 0) throw_errno("signalfd");
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) throw_errno("epoll_create1");

    listen_fd_ = socket(p_.listen.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw_errno("socket");
    const int rcvbuf = 4 << 20;
    setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);  // best effort
    if (bind(listen_fd_, p_.listen.sa(), p_.listen.len) != 0) {
      throw_errno("bind " + to_string(p_.listen));
    }
    watch(signal_fd_, kSignalId);
    watch(listen_fd_, kListenId);
  }
  ~Relay() {
    for (auto& [id, c] : clients_) close(c.fd);
    close(listen_fd_);
    close(epoll_fd_);
    close(signal_fd_);
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  Addr bound() const {
    Addr a;
    if (getsockname(listen_fd_, a.sa(), &a.len) != 0) throw_errno("getsockname");
    return a;
  }

  void run() {
    auto next_sweep = Clock::now() + std::chrono::seconds(1);
    std::array<epoll_event, 16> events{};
    while (!stop_) {
      auto now = Clock::now();
      auto wake = next_sweep;
      if (!queue_.empty()) wake = std::min(wake, queue_.front().due);
      // Round up so we never wake before the due time and spin.
      const auto wait_us =
          std::chrono::duration_cast<std::chrono::microseconds>(wake - now).count();
      const int timeout_ms = wait_us <= 0 ? 0 : static_cast<int>((wait_us + 999) / 1000);
      const int n =
          epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
      if (n < 0 && errno != EINTR) throw_errno("epoll_wait");
      now = Clock::now();
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[static_cast<std::size_t>(i)].data.u64;
        if (id == kSignalId) {
          stop_ = true;
        } else if (id == kListenId) {
          from_clients(now);
        } else {
          from_target(id, now);
        }
      }
      deliver_due(Clock::now());
      if (now >= next_sweep) {
        evict_idle(now);
        next_sweep = now + std::chrono::seconds(1);
      }
    }
  }

  void print_summary() const {
    auto dir = [](const Stats& s) {
      return "received " + std::to_string(s.received) + " forwarded " +
             std::to_string(s.forwarded) + " lost " + std::to_string(s.lost) + " overflow " +
             std::to_string(s.overflow) + " send_failed " + std::to_string(s.send_failed) +
             " expired " + std::to_string(s.expired);
    };
    std::fprintf(stderr,
                 "lossy_relay summary: to target: %s; to clients: %s; clients %zu evicted %llu\n",
                 dir(stats_[kToTarget]).c_str(), dir(stats_[kToClient]).c_str(), clients_.size(),
                 static_cast<unsigned long long>(evicted_));
  }

 private:
  struct Client {
    uint64_t id = 0;
    Addr addr;
    int fd = -1;  // connected to the target
    Clock::time_point last;
  };
  struct Pending {
    Clock::time_point due;
    uint64_t seq = 0;
    Dir dir = kToTarget;
    uint64_t client = 0;
    std::vector<char> data;
  };
  // std::*_heap builds a max-heap: "less" means "due later", so the front is the earliest.
  static bool later(const Pending& a, const Pending& b) {
    return a.due != b.due ? a.due > b.due : a.seq > b.seq;
  }

  void watch(int fd, uint64_t id) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl");
  }

  // The mapping for a client address, made on its first datagram; nullptr if no socket could be
  // made.
  Client* client_for(const Addr& from, Clock::time_point now) {
    const std::string key = to_string(from);
    if (auto it = by_addr_.find(key); it != by_addr_.end()) return &clients_.at(it->second);
    if (clients_.size() >= p_.max_clients) {  // full: evict the least recently active mapping
      auto lru = std::min_element(
          clients_.begin(), clients_.end(),
          [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
      drop_client(lru->first);
    }
    const int fd = socket(p_.target.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      spdlog::warn("socket for client {}: {}", key, std::strerror(errno));
      return nullptr;
    }
    if (connect(fd, p_.target.sa(), p_.target.len) != 0) {
      spdlog::warn("connect to {} for client {}: {}", to_string(p_.target), key,
                   std::strerror(errno));
      close(fd);
      return nullptr;
    }
    const uint64_t id = next_id_++;
    watch(fd, id);
    by_addr_.emplace(key, id);
    Client& c = clients_[id];
    c.id = id;
    c.addr = from;
    c.fd = fd;
    c.last = now;
    spdlog::debug("new client {} (id {})", key, id);
    return &c;
  }

  void drop_client(uint64_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    close(it->second.fd);  // also leaves the epoll set; queued datagrams to it count as expired
    by_addr_.erase(to_string(it->second.addr));
    clients_.erase(it);
    ++evicted_;
  }

  void evict_idle(Clock::time_point now) {
    std::vector<uint64_t> idle;
    for (const auto& [id, c] : clients_) {
      if (now - c.last > p_.idle) idle.push_back(id);
    }
    for (uint64_t id : idle) drop_client(id);
  }

  static bool transient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

  void from_clients(Clock::time_point now) {
    for (int i = 0; i < kBatch; ++i) {
      Addr from;
      const ssize_t n = recvfrom(listen_fd_, buf_.data(), buf_.size(), 0, from.sa(), &from.len);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (!transient(errno))
          spdlog::warn("recvfrom on the listen socket: {}", std::strerror(errno));
        return;
      }
      ++stats_[kToTarget].received;
      Client* c = client_for(from, now);
      if (c == nullptr) {
        ++stats_[kToTarget].send_failed;
        continue;
      }
      c->last = now;
      enqueue(kToTarget, c->id, static_cast<std::size_t>(n), now);
    }
  }

  void from_target(uint64_t id, Clock::time_point now) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;  // evicted earlier in this wake-up
    for (int i = 0; i < kBatch; ++i) {
      const ssize_t n = recv(it->second.fd, buf_.data(), buf_.size(), 0);
      if (n < 0) {
        if (errno == EINTR || errno == ECONNREFUSED) continue;  // ICMP from the target: no data
        if (!transient(errno))
          spdlog::warn("recv from {}: {}", to_string(p_.target), std::strerror(errno));
        return;
      }
      ++stats_[kToClient].received;
      it->second.last = now;
      enqueue(kToClient, id, static_cast<std::size_t>(n), now);
    }
  }

  // Loses the datagram in buf_ with probability p_.loss, else queues it for its due time.
  void enqueue(Dir dir, uint64_t client, std::size_t size, Clock::time_point now) {
    Stats& s = stats_[dir];
    if (p_.loss > 0 && unit_(rng_) < p_.loss) {
      ++s.lost;
      return;
    }
    if (queue_.size() >= p_.max_queued || queued_bytes_ + size > kMaxQueuedBytes) {
      ++s.overflow;
      return;
    }
    double delay = p_.delay_us;
    if (p_.jitter_us > 0) delay += (2 * unit_(rng_) - 1) * p_.jitter_us;
    Pending d;
    d.due = now + std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, delay)));
    d.seq = seq_++;
    d.dir = dir;
    d.client = client;
    d.data.assign(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(size));
    queued_bytes_ += size;
    queue_.push_back(std::move(d));
    std::push_heap(queue_.begin(), queue_.end(), later);
  }

  void deliver_due(Clock::time_point now) {
    while (!queue_.empty() && queue_.front().due <= now) {
      std::pop_heap(queue_.begin(), queue_.end(), later);
      Pending d = std::move(queue_.back());
      queue_.pop_back();
      queued_bytes_ -= d.data.size();
      Stats& s = stats_[d.dir];
      auto it = clients_.find(d.client);
      if (it == clients_.end()) {  // the mapping was evicted while the datagram waited
        ++s.expired;
        continue;
      }
      const ssize_t r = d.dir == kToTarget ? send(it->second.fd, d.data.data(), d.data.size(), 0)
                                           : sendto(listen_fd_, d.data.data(), d.data.size(), 0,
                                                    it->second.addr.sa(), it->second.addr.len);
      if (r < 0) {
        ++s.send_failed;  // a full socket buffer, or an ICMP error reported on this send
      } else {
        ++s.forwarded;
      }
    }
  }

  Params p_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::vector<char> buf_;
  int signal_fd_ = -1, epoll_fd_ = -1, listen_fd_ = -1;
  bool stop_ = false;
  std::unordered_map<std::string, uint64_t> by_addr_;  // "host:port" of a client -> its id
  std::unordered_map<uint64_t, Client> clients_;
  uint64_t next_id_ = 2;
  std::vector<Pending> queue_;  // a heap, earliest due first
  std::size_t queued_bytes_ = 0;
  uint64_t seq_ = 0;
  std::array<Stats, 2> stats_{};
  uint64_t evicted_ = 0;
};

constexpr const char* kSummary =
    "UDP relay that loses and delays datagrams (a userspace stand-in for tc netem).\n"
    "Clients send to --listen; each datagram goes on to --target from a socket of that client's\n"
    "own, and replies come back to the client. Each direction drops a datagram with probability\n"
    "--loss percent and delays the others by --delay-ms +- --jitter-ms (uniform). Prints\n"
    "'listening on ADDRESS' once bound; on SIGTERM/SIGINT prints one summary line on stderr\n"
    "(received, forwarded, lost, overflow, send_failed, expired, per direction) and exits 0.";

int relay_main(int argc, char** argv) {
  Options opts("lossy_relay", kSummary);
  opts.add()("listen", po::value<std::string>()->required(),
             "HOST:PORT the clients send to (port 0: any)")(
      "target", po::value<std::string>()->required(), "HOST:PORT the datagrams are relayed to")(
      "loss", po::value<double>()->default_value(0),
      "percent of datagrams dropped, each direction")(
      "delay-ms", po::value<double>()->default_value(0), "delay of each datagram, milliseconds")(
      "jitter-ms", po::value<double>()->default_value(0),
      "the delay varies uniformly by +- this many milliseconds")("seed", po::value<uint64_t>(),
                                                                 "random seed (default: random)")(
      "max-clients", po::value<std::size_t>()->default_value(4096), "client mappings kept at most")(
      "max-queued", po::value<std::size_t>()->default_value(100000),
      "datagrams waiting at most (beyond: dropped, counted as overflow)")(
      "idle-timeout-s", po::value<double>()->default_value(30),
      "a client mapping idle this long is evicted");
  if (auto code = opts.parse(argc, argv)) return *code;

  Params p;
  p.loss = opts.get<double>("loss") / 100;
  if (!(p.loss >= 0 && p.loss <= 1)) throw UsageError("--loss must be between 0 and 100");
  const double delay = opts.get<double>("delay-ms"), jitter = opts.get<double>("jitter-ms");
  if (!(delay >= 0 && delay <= 3.6e6)) throw UsageError("--delay-ms must be between 0 and 3600000");
  if (!(jitter >= 0 && jitter <= 3.6e6))
    throw UsageError("--jitter-ms must be between 0 and 3600000");
  p.delay_us = delay * 1000;
  p.jitter_us = jitter * 1000;
  p.max_clients = opts.get<std::size_t>("max-clients");
  p.max_queued = opts.get<std::size_t>("max-queued");
  if (p.max_clients == 0 || p.max_queued == 0)
    throw UsageError("--max-clients and --max-queued must be > 0");
  const double idle = opts.get<double>("idle-timeout-s");
  if (!(idle > 0 && idle <= 86400))
    throw UsageError("--idle-timeout-s must be between 0 and 86400");
  p.idle = std::chrono::milliseconds(static_cast<int64_t>(idle * 1000));
  p.seed = opts.has("seed") ? opts.get<uint64_t>("seed") : std::random_device{}();
  p.listen = resolve(opts.get<std::string>("listen"), "--listen");
  p.target = resolve(opts.get<std::string>("target"), "--target");

  Relay relay(p);
  const std::string where = to_string(relay.bound());
  spdlog::info("relaying {} -> {}: loss {}%, delay {} ms +- {} ms, seed {}", where,
               to_string(p.target), p.loss * 100, delay, jitter, p.seed);
  announce_listening(where);
  relay.run();
  relay.print_summary();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) { return run_main("lossy_relay", relay_main, argc, argv); }
