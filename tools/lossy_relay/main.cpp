// lossy_relay: a userspace stand-in for tc netem (used by the harness, harness/netns.h, on kernels
// without sch_netem): loses, duplicates, reorders and delays packets (FaultQueue, fault_queue.h),
// either the datagrams of a UDP relay (this file) or every frame of a link between two interfaces
// (--link, link_relay.cpp).
//
// UDP mode: clients send to --listen. Each client address gets its own upstream socket, connected
// to
// --target, so a reply arriving on that socket belongs to exactly that client and goes back to it
// from the --listen socket. A single thread waits in epoll for the sockets, the signals
// (signalfd) and the next due time. Everything is bounded: at most --max-clients mappings (idle
// ones evicted after --idle-timeout-s, the least recently active one when full) and the fault
// queue's bounds. SIGTERM/SIGINT: one summary line on stderr, exit 0.
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
#include "tools/lossy_relay/fault_queue.h"
#include "tools/lossy_relay/link_relay.h"
#include "tools/lossy_relay/relay_io.h"

namespace po = boost::program_options;
using namespace imhash;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBatch = 64;                        // datagrams read per socket per wake-up
constexpr uint64_t kListenId = 0, kSignalId = 1;  // epoll ids; client ids start at 2

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

struct Params {
  Addr listen, target;
  FaultParams faults;
  std::size_t max_clients = 4096;
  std::chrono::milliseconds idle{30000};
};

enum Dir { kToTarget = 0, kToClient = 1 };

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

class Relay {
 public:
  explicit Relay(const Params& p) : p_(p), faults_(p.faults), buf_(65536) {
    signal_fd_ = relay_io::stop_signal_fd();
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) relay_io::throw_errno("epoll_create1");

    listen_fd_ = socket(p_.listen.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) relay_io::throw_errno("socket");
    const int rcvbuf = 4 << 20;
    setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);  // best effort
    if (bind(listen_fd_, p_.listen.sa(), p_.listen.len) != 0) {
      relay_io::throw_errno("bind " + to_string(p_.listen));
    }
    relay_io::watch(epoll_fd_, signal_fd_, kSignalId);
    relay_io::watch(epoll_fd_, listen_fd_, kListenId);
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
    if (getsockname(listen_fd_, a.sa(), &a.len) != 0) relay_io::throw_errno("getsockname");
    return a;
  }

  void run() {
    auto next_sweep = Clock::now() + std::chrono::seconds(1);
    std::array<epoll_event, 16> events{};
    while (!stop_) {
      auto now = Clock::now();
      auto wake = next_sweep;
      if (faults_.waiting() > 0) {
        wake = std::min(wake, Clock::time_point(std::chrono::nanoseconds(faults_.next_due())));
      }
      // Round up so we never wake before the due time and spin.
      const auto wait_us =
          std::chrono::duration_cast<std::chrono::microseconds>(wake - now).count();
      const int timeout_ms = wait_us <= 0 ? 0 : static_cast<int>((wait_us + 999) / 1000);
      const int n =
          epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
      if (n < 0 && errno != EINTR) relay_io::throw_errno("epoll_wait");
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
    auto dir = [&](Dir d) { return describe(faults_.counts(d), stats_[d]); };
    std::fprintf(stderr,
                 "lossy_relay summary: to target: %s; to clients: %s; clients %zu evicted %llu\n",
                 dir(kToTarget).c_str(), dir(kToClient).c_str(), clients_.size(),
                 static_cast<unsigned long long>(evicted_));
  }

 private:
  struct Client {
    uint64_t id = 0;
    Addr addr;
    int fd = -1;  // connected to the target
    Clock::time_point last;
  };
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
    relay_io::watch(epoll_fd_, fd, id);
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
      Client* c = client_for(from, now);
      if (c == nullptr) {
        ++stats_[kToTarget].send_failed;
        continue;
      }
      c->last = now;
      faults_.offer(kToTarget, c->id, std::span(buf_.data(), static_cast<std::size_t>(n)),
                    ns_of(now));
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
      it->second.last = now;
      faults_.offer(kToClient, id, std::span(buf_.data(), static_cast<std::size_t>(n)), ns_of(now));
    }
  }

  void deliver_due(Clock::time_point now) {
    FaultQueue::Packet d;
    while (faults_.pop_due(ns_of(now), d)) {
      SendCounts& s = stats_[d.dir];
      auto it = clients_.find(d.key);
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
  FaultQueue faults_;
  std::vector<char> buf_;
  int signal_fd_ = -1, epoll_fd_ = -1, listen_fd_ = -1;
  bool stop_ = false;
  std::unordered_map<std::string, uint64_t> by_addr_;  // "host:port" of a client -> its id
  std::unordered_map<uint64_t, Client> clients_;
  uint64_t next_id_ = 2;
  std::array<SendCounts, 2> stats_{};
  uint64_t evicted_ = 0;
};

constexpr const char* kSummary =
    "A userspace stand-in for tc netem: loses, duplicates, reorders and delays packets.\n"
    "UDP mode (--listen, --target): clients send to --listen; each datagram goes on to --target\n"
    "from a socket of that client's own, and replies come back to the client.\n"
    "Link mode (--link A,B): every Ethernet frame arriving on interface A goes out on B and the\n"
    "reverse (AF_PACKET; root; both interfaces in this namespace, for instance a veth end taken\n"
    "out of a bridge and a new veth pair into it): everything on that link goes through.\n"
    "Each direction drops a packet with probability --loss percent, sends a kept one twice with\n"
    "probability --duplicate, sends it at once (ahead of the delayed ones) with probability\n"
    "--reorder, and delays the others by --delay-ms +- --jitter-ms (uniform). Prints\n"
    "'listening on ADDRESS' (UDP) or 'relaying A <-> B' (link) once ready; on SIGTERM/SIGINT\n"
    "prints one summary line on stderr (per direction: received, forwarded, lost, duplicated,\n"
    "reordered, overflow, send_failed, expired) and exits 0.";

double percent(const Options& opts, const char* name) {
  const double v = opts.get<double>(name);
  if (!(v >= 0 && v <= 100))
    throw UsageError(std::string("--") + name + " must be between 0 and 100");
  return v / 100;
}

double milliseconds(const Options& opts, const char* name) {
  const double v = opts.get<double>(name);
  if (!(v >= 0 && v <= 3.6e6))
    throw UsageError(std::string("--") + name + " must be between 0 and 3600000");
  return v;
}

int relay_main(int argc, char** argv) {
  Options opts("lossy_relay", kSummary);
  opts.add()("listen", po::value<std::string>(),
             "UDP mode: HOST:PORT the clients send to (port 0: any)")(
      "target", po::value<std::string>(), "UDP mode: HOST:PORT the datagrams are relayed to")(
      "link", po::value<std::string>(), "link mode: IFACE_A,IFACE_B, the two interfaces to join")(
      "loss", po::value<double>()->default_value(0), "percent of packets dropped, each direction")(
      "duplicate", po::value<double>()->default_value(0), "percent of kept packets sent twice")(
      "reorder", po::value<double>()->default_value(0),
      "percent of kept packets sent at once, ahead of the delayed ones (needs --delay-ms)")(
      "delay-ms", po::value<double>()->default_value(0), "delay of each packet, milliseconds")(
      "jitter-ms", po::value<double>()->default_value(0),
      "the delay varies uniformly by +- this many milliseconds")("seed", po::value<uint64_t>(),
                                                                 "random seed (default: random)")(
      "max-clients", po::value<std::size_t>()->default_value(4096),
      "UDP mode: client mappings kept at most")(
      "max-queued", po::value<std::size_t>()->default_value(100000),
      "packets waiting at most (beyond: dropped, counted as overflow)")(
      "idle-timeout-s", po::value<double>()->default_value(30),
      "UDP mode: a client mapping idle this long is evicted");
  if (auto code = opts.parse(argc, argv)) return *code;

  Params p;
  FaultParams& f = p.faults;
  f.loss = percent(opts, "loss");
  f.duplicate = percent(opts, "duplicate");
  f.reorder = percent(opts, "reorder");
  const double delay = milliseconds(opts, "delay-ms"), jitter = milliseconds(opts, "jitter-ms");
  f.delay_ns = static_cast<int64_t>(delay * 1e6);
  f.jitter_ns = static_cast<int64_t>(jitter * 1e6);
  if (f.reorder > 0 && f.delay_ns == 0)
    throw UsageError("--reorder needs --delay-ms (what the others wait)");
  f.max_queued = opts.get<std::size_t>("max-queued");
  f.seed = opts.has("seed") ? opts.get<uint64_t>("seed") : std::random_device{}();
  p.max_clients = opts.get<std::size_t>("max-clients");
  if (p.max_clients == 0 || f.max_queued == 0)
    throw UsageError("--max-clients and --max-queued must be > 0");
  const double idle = opts.get<double>("idle-timeout-s");
  if (!(idle > 0 && idle <= 86400))
    throw UsageError("--idle-timeout-s must be between 0 and 86400");
  p.idle = std::chrono::milliseconds(static_cast<int64_t>(idle * 1000));
  const std::string faults =
      fmt::format("loss {}%, duplicate {}%, reorder {}%, delay {} ms +- {} ms, seed {}",
                  f.loss * 100, f.duplicate * 100, f.reorder * 100, delay, jitter, f.seed);

  if (opts.has("link")) {
    if (opts.has("listen") || opts.has("target"))
      throw UsageError("--link is a mode of its own: no --listen or --target with it");
    const std::string link = opts.get<std::string>("link");
    const auto comma = link.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == link.size() ||
        link.find(',', comma + 1) != std::string::npos) {
      throw UsageError("--link wants two interface names, IFACE_A,IFACE_B");
    }
    return run_link_relay(link.substr(0, comma), link.substr(comma + 1), f, faults);
  }
  if (!opts.has("listen") || !opts.has("target"))
    throw UsageError("give --listen and --target (UDP mode) or --link (link mode)");
  p.listen = resolve(opts.get<std::string>("listen"), "--listen");
  p.target = resolve(opts.get<std::string>("target"), "--target");

  Relay relay(p);
  const std::string where = to_string(relay.bound());
  spdlog::info("relaying {} -> {}: {}", where, to_string(p.target), faults);
  announce_listening(where);
  relay.run();
  relay.print_summary();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) { return run_main("lossy_relay", relay_main, argc, argv); }
