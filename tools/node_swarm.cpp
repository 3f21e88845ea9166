// node_swarm: many nodes against one config server, from one process (scripts/bench swarm).
//
// Opens --nodes config links (default 10000), each a real imhash::ConfigLink
// (common/links/config_link.h) on the one io_context this process runs on its main thread, started
// --connect-rate a second so that the config server's listener is not flooded with SYNs. Each
// simulated node registers as a login server named PREFIX-I (I from 0) with the address
// 127.0.0.1:PORT (a port of its own, 20000 + I wrapped into 1024..65535; nothing listens there: the
// config server only shows it), no shards and table version 0; it acknowledges every table pushed
// to it at once, and its heartbeats carry a small stats object ({"requests": N}, N growing by one
// per heartbeat) and, as every ConfigLink's, the wall-clock time they were sent. What the config
// server does with them (its CPU, memory, heartbeat lag) is what scripts/bench swarm measures.
//
// Every second one line on stdout: the seconds elapsed, links started, nodes welcomed
// (ConfigLink::connected()), tables acknowledged, sessions lost, heartbeats sampled per second.
// After --duration-s (or on SIGINT/SIGTERM) every link is stopped, a summary line follows with
// this process's CPU time (getrusage), and it exits 0. Logs at warn unless --verbose (each link
// logs its own connects and losses at info).
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/links/config_link.h"
#include "common/routing/table_text.h"
#include "common/runtime/cluster_key.h"
#include "common/runtime/config_addresses.h"
#include "common/runtime/options.h"
#include "common/runtime/tls_options.h"

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Descriptors beyond one per link: stdio, the resolver's, the signal pipe, the epoll fd, slack.
constexpr uint64_t kSpareDescriptors = 64;
constexpr auto kStartTick = 10ms;       // links are started in small batches this often
constexpr auto kDrainLimit = 5s;        // after stop(): the longest wait for the links to unwind
constexpr uint32_t kFirstPort = 20000;  // node I registers 127.0.0.1:(kFirstPort + I), wrapped
constexpr uint32_t kLowestPort = 1024;  // into kLowestPort..65535
constexpr uint32_t kMaxNodes = 60000;   // one source address has ~64k ports to one server

struct Node {
  std::unique_ptr<imhash::ConfigLink> link;
  uint64_t requests = 0;  // the "requests" stat: one more per heartbeat
};

// What the callbacks count, over all nodes.
struct Counters {
  uint64_t started = 0;
  uint64_t acked = 0;       // tables acknowledged
  uint64_t welcomes = 0;    // on_state(true)
  uint64_t lost = 0;        // on_state(false): welcomed sessions that ended
  uint64_t heartbeats = 0;  // stats sampled, one per heartbeat sent
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double cpu_seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

uint16_t node_port(uint32_t i) {
  constexpr uint32_t span = 65536 - kLowestPort;
  return static_cast<uint16_t>(kLowestPort + (kFirstPort - kLowestPort + i) % span);
}

// Raises the soft RLIMIT_NOFILE to the hard limit; false (with `why`) if `needed` descriptors are
// not available then.
bool raise_descriptor_limit(uint64_t needed, std::string& why) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    why = "getrlimit(RLIMIT_NOFILE) failed";
    return false;
  }
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed) {
    why =
        "needs " + std::to_string(needed) + " file descriptors (one per node and " +
        std::to_string(kSpareDescriptors) + " more) but the limit is " +
        std::to_string(lim.rlim_cur) + " (hard limit " +
        (lim.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(lim.rlim_max)) +
        "): raise it (ulimit -Hn, LimitNOFILE=, /etc/security/limits.conf) or give fewer --nodes";
    return false;
  }
  return true;
}

constexpr const char* kSummary =
    "many simulated nodes against one config server, from one process.\n"
    "Opens --nodes config links (real ConfigLinks, one TCP connection each),\n"
    "--connect-rate new ones a second. Node I registers as a login server named\n"
    "PREFIX-I with the address 127.0.0.1:PORT (a port of its own; nothing listens\n"
    "there), heartbeats at the interval the config server gives (stats:\n"
    "{\"requests\": N}) and acks every table pushed to it at once.\n"
    "Every second a line on stdout: seconds elapsed, links started, nodes welcomed\n"
    "(registered and connected now), tables acked, welcomed sessions lost,\n"
    "heartbeats sent in that second. After --duration-s, or on SIGINT/SIGTERM,\n"
    "every link is stopped and a summary line follows (\"node_swarm: N nodes, W\n"
    "welcomed at the end, ...\", with this process's CPU time).\n"
    "Raises its descriptor limit to the hard limit; needs --nodes + 64 descriptors.\n"
    "The config server must take that many links: its --max-node-connections (default\n"
    "1024) and --max-node-connections-per-source (64; all of loopback is one source),\n"
    "and its own descriptor limit.\n"
    "Exit status: 0 ok (the run ended, or a signal stopped it); 64 bad command\n"
    "line; 69 not enough file descriptors";

int swarm_main(int argc, char** argv) {
  namespace po = boost::program_options;
  imhash::Options opts("node_swarm", kSummary);
  opts.add()("config", po::value<std::string>(),
             "config server HOST:PORT (required); several comma-separated (A:P,B:P) are tried in "
             "turn, as by a real node")(
      "nodes", po::value<uint32_t>()->default_value(10000),
      "simulated nodes: one config link (one TCP connection, one file descriptor) each")(
      "duration-s", po::value<double>()->default_value(60),
      "seconds to run from the start (links are started during it); then every link is stopped "
      "and the program exits 0")(
      "connect-rate", po::value<uint32_t>()->default_value(2000),
      "links started per second (so that the config server's listener is not flooded with SYNs)")(
      "name-prefix", po::value<std::string>()->default_value("swarm"),
      "node I registers as PREFIX-I (role login), with the address 127.0.0.1:PORT, PORT = 20000 "
      "+ I wrapped into 1024..65535")("verbose", po::bool_switch(),
                                      "log at info (each link's connects and losses); default "
                                      "warn, unless --log-level is given");
  imhash::ClusterKey::add_options(opts);
  imhash::TlsOptions::add_options(opts);
  if (auto code = opts.parse(argc, argv)) return *code;
  if (!opts.has("log-level")) {
    spdlog::set_level(opts.get<bool>("verbose") ? spdlog::level::info : spdlog::level::warn);
  }

  if (!opts.has("config")) throw imhash::UsageError("--config HOST:PORT is required");
  const std::string config = opts.get<std::string>("config");
  imhash::ConfigAddresses::parse(config, "--config");  // a malformed list is a usage error
  const uint32_t nodes = opts.get<uint32_t>("nodes");
  if (nodes == 0 || nodes > kMaxNodes) {
    throw imhash::UsageError("--nodes must be 1 to " + std::to_string(kMaxNodes));
  }
  const double duration_s = opts.get<double>("duration-s");
  if (!(duration_s > 0 && duration_s <= 86400)) {
    throw imhash::UsageError("--duration-s must be more than 0 and at most 86400");
  }
  const uint32_t rate = opts.get<uint32_t>("connect-rate");
  if (rate == 0) throw imhash::UsageError("--connect-rate must be at least 1");
  const std::string prefix = opts.get<std::string>("name-prefix");
  const std::string longest = prefix + "-" + std::to_string(nodes - 1);
  if (!imhash::is_valid_server_name(longest)) {
    throw imhash::UsageError("--name-prefix '" + prefix + "' makes names like '" + longest +
                             "', which are not valid (" + std::string(imhash::kServerNameRule) +
                             ")");
  }
  imhash::ConfigLinkSettings settings;
  settings.cluster_key = imhash::ClusterKey::from(opts).key;
  settings.tls = imhash::TlsOptions::from(opts).context;

  std::string why;
  if (!raise_descriptor_limit(uint64_t{nodes} + kSpareDescriptors, why)) {
    std::fprintf(stderr, "node_swarm: --nodes %u %s\n", nodes, why.c_str());
    return imhash::kExitUnavailable;
  }

  asio::io_context ctx(1);
  Counters count;
  std::vector<Node> swarm(nodes);  // destroyed (links stopped) before ctx
  asio::steady_timer start_timer(ctx), tick_timer(ctx), end_timer(ctx);
  asio::signal_set signals(ctx, SIGINT, SIGTERM);
  const Clock::time_point t0 = Clock::now();
  std::optional<Clock::time_point> stopping;  // set once the links are being stopped
  std::optional<double> all_welcomed_s;       // when every node was first welcomed at once
  uint64_t last_heartbeats = 0;
  uint64_t welcomed_at_end = 0;  // just before the links were stopped
  int stopped_by_signal = 0;

  const auto welcomed = [&] {
    uint64_t w = 0;
    for (uint64_t i = 0; i < count.started; ++i) w += swarm[i].link->connected();
    return w;
  };

  const auto start_link = [&](uint32_t i) {
    imhash::control::Register self;
    self.role = imhash::Role::kLogin;
    self.name = prefix + "-" + std::to_string(i);
    self.address = "127.0.0.1:" + std::to_string(node_port(i));
    self.shards = 0;
    self.version = 0;
    self.pid = static_cast<uint64_t>(::getpid());
    imhash::ConfigLink::Callbacks cb;
    cb.on_table = [&swarm, &count, i](imhash::control::TablePush push) {
      swarm[i].link->ack(push.table.version);
      ++count.acked;
    };
    cb.stats = [&swarm, &count, i] {
      ++count.heartbeats;
      return boost::json::object{{"requests", ++swarm[i].requests}};
    };
    cb.on_state = [&](bool up) {
      ++(up ? count.welcomes : count.lost);
      // Every welcomed session that ended was reported: welcomes - lost links are up now.
      if (up && !all_welcomed_s && count.welcomes - count.lost == nodes) {
        all_welcomed_s = seconds_since(t0);
        std::printf("node_swarm: all %u nodes welcomed after %.2f s\n", nodes, *all_welcomed_s);
        std::fflush(stdout);
      }
    };
    swarm[i].link =
        std::make_unique<imhash::ConfigLink>(ctx, config, std::move(self), std::move(cb), settings);
    swarm[i].link->start();
  };

  const auto stop_all = [&] {
    if (stopping) return;
    welcomed_at_end = welcomed();
    stopping = Clock::now();
    for (uint64_t i = 0; i < count.started; ++i) swarm[i].link->stop();
    start_timer.cancel();
    tick_timer.cancel();
    end_timer.cancel();
    signals.cancel();
  };

  // Starts the links due by now at --connect-rate, in batches every kStartTick.
  std::function<void()> start_due = [&] {
    if (stopping) return;
    const double due = std::min<double>(nodes, 1 + seconds_since(t0) * rate);
    while (count.started < due) start_link(static_cast<uint32_t>(count.started++));
    if (count.started >= nodes) return;
    start_timer.expires_after(kStartTick);
    start_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) start_due();
    });
  };

  std::function<void()> tick = [&] {
    const double t = seconds_since(t0);
    const uint64_t w = welcomed();
    std::printf(
        "[%5.1fs] started %lu  welcomed %lu  tables acked %lu  sessions lost %lu  heartbeats "
        "%lu/s\n",
        t, static_cast<unsigned long>(count.started), static_cast<unsigned long>(w),
        static_cast<unsigned long>(count.acked), static_cast<unsigned long>(count.lost),
        static_cast<unsigned long>(count.heartbeats - last_heartbeats));
    std::fflush(stdout);
    last_heartbeats = count.heartbeats;
    tick_timer.expires_at(t0 + std::chrono::seconds(static_cast<long>(t) + 1));
    tick_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec && !stopping) tick();
    });
  };

  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    stopped_by_signal = sig;
    stop_all();
  });
  end_timer.expires_at(
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration_s)));
  end_timer.async_wait([&](boost::system::error_code ec) {
    if (!ec) stop_all();
  });
  start_due();
  tick_timer.expires_at(t0 + 1s);
  tick_timer.async_wait([&](boost::system::error_code ec) {
    if (!ec && !stopping) tick();
  });

  // Runs until every link has unwound after stop_all() (ctx then runs out of work), or at most
  // kDrainLimit after it.
  while (!ctx.stopped()) {
    ctx.run_for(100ms);
    if (stopping && Clock::now() - *stopping > kDrainLimit) {
      spdlog::warn("the links had not all unwound {} s after being stopped",
                   std::chrono::duration_cast<std::chrono::seconds>(kDrainLimit).count());
      break;
    }
  }

  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const double elapsed = seconds_since(t0);
  const double user = cpu_seconds(ru.ru_utime), sys = cpu_seconds(ru.ru_stime);
  char all[64] = "never all welcomed at once";
  if (all_welcomed_s) std::snprintf(all, sizeof all, "all welcomed after %.2f s", *all_welcomed_s);
  const std::string signal_note =
      stopped_by_signal ? " (stopped by signal " + std::to_string(stopped_by_signal) + ")" : "";
  std::printf(
      "node_swarm: %u nodes, %lu welcomed at the end, %s, %lu links started, %lu welcomes, %lu "
      "sessions lost, %lu tables acked, %lu heartbeats; %.1f s%s; CPU %.2f s (user %.2f, system "
      "%.2f): %.1f%% of one core; max RSS %ld MB\n",
      nodes, static_cast<unsigned long>(welcomed_at_end), all,
      static_cast<unsigned long>(count.started), static_cast<unsigned long>(count.welcomes),
      static_cast<unsigned long>(count.lost), static_cast<unsigned long>(count.acked),
      static_cast<unsigned long>(count.heartbeats), elapsed, signal_note.c_str(), user + sys, user,
      sys, 100 * (user + sys) / elapsed, ru.ru_maxrss / 1024);
  std::fflush(stdout);
  return imhash::kExitOk;
}

}  // namespace

int main(int argc, char** argv) { return imhash::run_main("node_swarm", swarm_main, argc, argv); }
