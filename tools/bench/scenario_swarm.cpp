// Scenario swarm (bench.sh's bench_swarm): the config server's cost per node. One config server
// (file store, heartbeat 1000 ms, its other defaults; node link limits raised to take them all)
// and `nodes` node links from one tools/node_swarm process (each a real ConfigLink registered as a
// login server, heartbeating every 1000 ms, acking every table at once, started `connect_rate` a
// second) for `seconds`. Once every node is up at the config server and welcomed at node_swarm
// (waited for half the run at most; then as many as are up) and a second of node_swarm's has seen
// the nodes heartbeat at their pace (bench.sh waited 2 s), until 2 s before node_swarm's end: the
// config server's CPU and node_swarm's (/proc/PID/stat), the config server's RSS before the swarm
// and at the end of the window, heartbeats handled per second and the heartbeat lag's quantiles,
// both from the growth of its /metrics between the window's two scrapes. Each scrape renders a
// page of every node (three gauges each), so the wait for registration scrapes once a second and
// the window scrapes only at its ends, outside the CPU measurement. The descriptor limit (one per
// link on each side) is raised to the hard limit; the run fails if that is under nodes + 128.
//
// Figures: nodes; registration: {all_up_and_welcomed, all_up_and_welcomed_s (null if not),
// all_up_at_config_server_s (null if never), up_at_last_poll, welcomed}; heartbeat_pace_reached
// (whether the window began on an event, or after its bound); window_s; config_server:
// {cpu_percent_of_core, rss_before_bytes, rss_during_bytes, rss_per_node_bytes, nodes_counted
// (the nodes up at the window's end, or `nodes` if none)}; heartbeats_handled_per_s;
// nodes_up_at_window_start, nodes_up_at_window_end; heartbeat_lag: {heartbeats, p50_ms, p99_ms,
// max_ms (the upper bound of the highest bucket used), mean_ms, beyond_last_bound: [those of
// "p50", "p99", "max" that fell in the +Inf bucket: their value is the largest finite bound, a
// lower bound]} (null if the config server has no such histogram or no heartbeat came in the
// window); nodes_at_window_end: {up, down, lagging, welcomed (node_swarm's)}; node_links_refused,
// node_links_closed (in the window); node_swarm: {cpu_percent_of_core (null if it was gone at
// the window's end), exit_status, summary (its last line, "" if none)}.
//
// Main thread only.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/wait_until.h"
#include "tools/bench/bench.h"
#include "tools/bench/metrics_scrape.h"
#include "tools/bench/programs.h"

// Its own namespace: a unity build compiles several scenario files as one, anonymous namespaces
// and all.
namespace imhash::bench::swarm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kLoginNodes = "imhash_config_nodes{role=\"login\",state=";
const std::string kUp = kLoginNodes + "\"up\"}";
const std::string kLag = "imhash_config_heartbeat_lag_seconds";

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

milliseconds ms_until(Clock::time_point t) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(t - Clock::now()));
}

// One descriptor per link on both sides: the config server and node_swarm inherit the driver's
// limit, raised here to the hard one.
void raise_descriptor_limit(int64_t nodes) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  getrlimit(RLIMIT_NOFILE, &lim);
  const auto needed = static_cast<rlim_t>(nodes + 128);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed) {
    throw std::runtime_error(
        format("%ld nodes need %lu file descriptors per process, the limit is "
               "%lu (hard %lu)",
               static_cast<long>(nodes), static_cast<unsigned long>(needed),
               static_cast<unsigned long>(lim.rlim_cur), static_cast<unsigned long>(lim.rlim_max)));
  }
}

// node_swarm's stdout as it comes, copied to a file of the run: its progress lines ("[  5.0s]
// started S  welcomed W  tables acked A  sessions lost L  heartbeats H/s"), the line that says
// every node was welcomed, and its summary at the end.
class SwarmOutput {
 public:
  struct Progress {
    double t = -1;  // node_swarm's seconds since its start
    unsigned long welcomed = 0, heartbeats_per_s = 0;
  };

  SwarmOutput(test::ChildProcess& child, const std::string& file, int64_t nodes)
      : child_(child),
        copy_(file),
        nodes_(static_cast<unsigned long>(nodes)),
        all_welcomed_("node_swarm: all " + std::to_string(nodes) + " nodes welcomed after %lf") {}

  // Takes what node_swarm printed since the last call, whole lines only.
  void read() {
    const std::string more = child_.available_output();
    copy_ << more << std::flush;
    partial_ += more;
    for (auto end = partial_.find('\n'); end != std::string::npos; end = partial_.find('\n')) {
      line(partial_.substr(0, end));
      partial_.erase(0, end + 1);
    }
  }
  const Progress& last() const { return last_; }
  size_t progress_lines() const { return progress_lines_; }
  // When every node was first welcomed at once, node_swarm's seconds (none yet: not so far).
  const std::optional<double>& all_welcomed_s() const { return all_welcomed_s_; }
  const std::string& summary() const { return summary_; }

 private:
  void line(const std::string& text) {
    Progress p;
    unsigned long started = 0, acked = 0, lost = 0;
    if (std::sscanf(text.c_str(),
                    "[%lfs] started %lu welcomed %lu tables acked %lu sessions lost %lu "
                    "heartbeats %lu/s",
                    &p.t, &started, &p.welcomed, &acked, &lost, &p.heartbeats_per_s) == 6) {
      last_ = p;
      ++progress_lines_;
    } else if (double at = 0; std::sscanf(text.c_str(), all_welcomed_.c_str(), &at) == 1) {
      all_welcomed_s_ = at;
      last_.welcomed = nodes_;  // the latest news of the count (it may come before any progress)
    } else if (text.rfind("node_swarm: ", 0) == 0 && text.size() > 12 &&
               std::isdigit(static_cast<unsigned char>(text[12]))) {
      summary_ = text;
    }
  }

  test::ChildProcess& child_;
  std::ofstream copy_;
  const unsigned long nodes_;
  const std::string all_welcomed_;  // a scanf format
  std::string partial_, summary_;
  Progress last_;
  size_t progress_lines_ = 0;
  std::optional<double> all_welcomed_s_;
};

// "12.34 ms", or "> 5000 ms" for a value beyond the histogram's last bound.
std::string lag_text(const BucketValue& v, const char* inside) {
  return v.beyond_last_bound ? format("> %g ms", v.value * 1000) : format(inside, v.value * 1000);
}

// The heartbeat lag's quantiles over the window (null without any), and its say() line.
boost::json::value lag_figures(Context& ctx, const MetricsPage& a, const MetricsPage& b) {
  const Histogram h = Histogram::between(a, b, kLag);
  if (h.buckets.empty() || h.count <= 0) {
    ctx.result.say(h.buckets.empty() ? "lag: not exposed" : "lag: no heartbeat in the window");
    return nullptr;
  }
  const BucketValue p50 = quantile(h, 0.5), p99 = quantile(h, 0.99), top = highest_bucket(h);
  boost::json::array beyond;
  if (p50.beyond_last_bound) beyond.push_back("p50");
  if (p99.beyond_last_bound) beyond.push_back("p99");
  if (top.beyond_last_bound) beyond.push_back("max");
  const double mean_ms = h.sum / h.count * 1000;
  ctx.result.say(
      format("heartbeat lag (the node's send to its handling, %.0f heartbeats in the window): "
             "p50 %s  p99 %s  max %s (its bucket)  mean %.2f ms",
             h.count, lag_text(p50, "%.2f ms").c_str(), lag_text(p99, "%.2f ms").c_str(),
             lag_text(top, "<= %g ms").c_str(), mean_ms));
  return boost::json::object{
      {"heartbeats", h.count},      {"p50_ms", p50.value * 1000},
      {"p99_ms", p99.value * 1000}, {"max_ms", top.value * 1000},
      {"mean_ms", mean_ms},         {"beyond_last_bound", std::move(beyond)}};
}

void run_swarm(Context& ctx) {
  Settings& s = ctx.settings;
  const int64_t n =
      s.integer("nodes", 10000, "node links from the one node_swarm process (1 to 60000)");
  const int64_t total = s.integer(
      "seconds", 60, "node_swarm's whole run: links started, registered, then measured (s)");
  const int64_t rate =
      s.integer("connect_rate", 2000, "node_swarm's --connect-rate: links started per second");
  if (n < 1 || n > 60000) throw std::invalid_argument("nodes: 1 to 60000");
  if (total < 1) throw std::invalid_argument("seconds: at least 1");
  if (rate < 1) throw std::invalid_argument("connect_rate: at least 1");
  if (s.describing) return;

  raise_descriptor_limit(n);
  const std::string limit = std::to_string(n > 10000 ? 2 * n : 20000);
  test::ConfigClusterOptions options;
  options.binaries = ctx.self;
  options.heartbeat_ms = 1000;
  // The config server's own defaults, as bench.sh ran it (the harness's are for quick tests).
  options.grace_ms = 60000;
  options.initial_mode = "ring";
  options.metrics = true;
  options.config_args = {"--max-node-connections", limit, "--max-node-connections-per-source",
                         limit};
  test::ConfigCluster cluster(options);
  cluster.start_config();
  const std::string metrics = cluster.config_metrics();
  const pid_t config_pid = cluster.config().pid();
  // Its RSS once it serves (a first page answered), before any node.
  if (!test::wait_until([&] { return !MetricsPage::scrape(metrics).empty(); })) {
    throw std::runtime_error("the config server's /metrics does not answer");
  }
  const uint64_t rss_before = rss_bytes(config_pid);

  ctx.result.say(
      format("== config server under %ld node links from one process (tools/node_swarm: login "
             "role, heartbeat",
             static_cast<long>(n)));
  ctx.result.say(format(
      "   1000 ms, each acks every table at once; started %ld links/s), %ld s in all, %ld cores",
      static_cast<long>(rate), static_cast<long>(total), sysconf(_SC_NPROCESSORS_ONLN)));
  const auto t_launch = Clock::now();
  test::ChildProcess swarm(
      ctx.self.node_swarm,
      {"--config", cluster.config_address(), "--nodes", std::to_string(n), "--duration-s",
       std::to_string(total), "--connect-rate", std::to_string(rate)},
      test::ChildOptions{.name = "node_swarm"});
  SwarmOutput out(swarm, ctx.work_dir + "/node_swarm.out", n);

  // Every node up (polled once a second: each scrape renders every node), for at most half the
  // run: the other half is measured with as many as are up by then. Up at the config server and
  // welcomed at node_swarm both: a node whose welcome came after its link's deadline (2 s) is up
  // at the config server (it registered) but the node dials again and does not heartbeat.
  const auto registration_end =
      t_launch + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(static_cast<double>(total / 2)));
  std::optional<double> t_up, t_all;
  double up = 0;
  test::wait_until(
      [&] {
        out.read();
        up = MetricsPage::scrape(metrics).value(kUp);
        if (!t_up && up >= static_cast<double>(n)) t_up = seconds_between(t_launch, Clock::now());
        if (t_up && out.all_welcomed_s()) {
          t_all = seconds_between(t_launch, Clock::now());
          return true;
        }
        return !swarm.running();
      },
      ms_until(registration_end), std::chrono::seconds(1));
  out.read();
  boost::json::object registration{{"all_up_and_welcomed", t_all.has_value()},
                                   {"all_up_and_welcomed_s", nullptr},
                                   {"all_up_at_config_server_s", nullptr},
                                   {"up_at_last_poll", up},
                                   {"welcomed", out.last().welcomed}};
  if (t_up) registration["all_up_at_config_server_s"] = *t_up;
  if (t_all) {
    registration["all_up_and_welcomed_s"] = *t_all;
    ctx.result.say(
        format("registered: all %ld nodes up at the config server and welcomed at node_swarm "
               "%.1f s after it started (polled once a second)",
               static_cast<long>(n), *t_all));
  } else {
    const std::string at_cs = t_up ? format("all up at the config server after %.1f s", *t_up)
                                   : std::string("never all up at the config server");
    ctx.result.say(format(
        "registered: NOT all %ld s after node_swarm started: %s (%.0f up at the last poll), %lu "
        "welcomed at node_swarm; measuring the rest of the run as it is",
        static_cast<long>(total / 2), at_cs.c_str(), up, out.last().welcomed));
  }
  ctx.result.figures["nodes"] = n;
  ctx.result.figures["registration"] = std::move(registration);

  // The window begins once the heartbeats run at their pace: the first whole second of
  // node_swarm's after every node was welcomed (without that: reported after the wait above) in
  // which its welcomed nodes sent at least 90% of one heartbeat each (the per-second count of a
  // steady swarm wavers a little around the node count). bench.sh waited 2 s instead.
  const size_t seen = out.progress_lines();
  bool at_pace = false;
  test::wait_until(
      [&] {
        out.read();
        const SwarmOutput::Progress& p = out.last();
        const auto& all = out.all_welcomed_s();
        at_pace = out.progress_lines() > seen && (!all || p.t - 1 >= *all) && p.welcomed > 0 &&
                  static_cast<double>(p.heartbeats_per_s) >= 0.9 * static_cast<double>(p.welcomed);
        return at_pace || !swarm.running();
      },
      std::chrono::seconds(10), milliseconds(50));
  ctx.result.figures["heartbeat_pace_reached"] = at_pace;
  // ... and ends 2 s before node_swarm's end, while every link is still up.
  const double end_t = static_cast<double>(total) - 2;
  const auto end_at =
      t_launch + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(end_t));
  if (seconds_between(Clock::now(), end_at) < 3) {
    throw std::runtime_error("less than 3 s left to measure (raise the setting seconds)");
  }

  // The CPU window lies between the two scrapes (their rendering is not in it); the counters'
  // growth is over the time between the scrapes' midpoints.
  const auto m0a = Clock::now();
  const MetricsPage page0 = MetricsPage::scrape(metrics);
  const auto m0b = Clock::now();
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds(config_pid), s0 = cpu_seconds(swarm.pid());
  // node_swarm's progress line of second `end_t` (its clock runs its --duration-s) ends it.
  test::wait_until(
      [&] {
        out.read();
        return out.last().t >= end_t || !swarm.running();
      },
      ms_until(end_at) + std::chrono::seconds(10), milliseconds(20));
  const auto t1 = Clock::now();
  const double c1 = cpu_seconds(config_pid), s1 = cpu_seconds(swarm.pid());
  const uint64_t rss_during = rss_bytes(config_pid);
  const unsigned long welcomed = out.last().welcomed;
  const auto m1a = Clock::now();
  const MetricsPage page1 = MetricsPage::scrape(metrics);
  const auto m1b = Clock::now();

  // node_swarm stops its links at the end of its run and exits; at most 20 s more.
  const int swarm_status = swarm.stop(0, std::chrono::seconds(20));
  out.read();
  if (swarm_status == 128 + SIGKILL) {
    ctx.result.say("node_swarm still running 20 s after its end: killed");
  }

  const double dt = seconds_between(t0, t1);
  const double mdt = (seconds_between(m0a, m1a) + seconds_between(m0b, m1b)) / 2;
  ctx.result.figures["window_s"] = dt;
  ctx.result.say(
      format("window: %.1f s, from the first second at the heartbeats' pace after every node was "
             "up (or half the run) to 2 s before node_swarm's end",
             dt));
  const double config_cpu = 100 * (c1 - c0) / dt;
  ctx.result.say(format("config server CPU: %.1f%% of one core", config_cpu));
  const double up0 = page0.value(kUp), up1 = page1.value(kUp);
  const double per = up1 > 0 ? up1 : static_cast<double>(n);
  const double rss_per_node =
      (static_cast<double>(rss_during) - static_cast<double>(rss_before)) / per;
  ctx.result.say(format(
      "config server RSS: %.1f MB before the swarm, %.1f MB during: %.1f KB per node (%.0f up)",
      static_cast<double>(rss_before) / (1 << 20), static_cast<double>(rss_during) / (1 << 20),
      rss_per_node / 1024, per));
  ctx.result.figures["config_server"] = {{"cpu_percent_of_core", config_cpu},
                                         {"rss_before_bytes", rss_before},
                                         {"rss_during_bytes", rss_during},
                                         {"rss_per_node_bytes", rss_per_node},
                                         {"nodes_counted", per}};
  const double heartbeats_per_s = (page1.total("imhash_config_heartbeats_total") -
                                   page0.total("imhash_config_heartbeats_total")) /
                                  mdt;
  ctx.result.say(
      format("heartbeats handled: %.0f/s (%.0f nodes up at the window's start, %.0f at its end, "
             "of %ld: one each per 1000 ms)",
             heartbeats_per_s, up0, up1, static_cast<long>(n)));
  ctx.result.figures["heartbeats_handled_per_s"] = heartbeats_per_s;
  ctx.result.figures["nodes_up_at_window_start"] = up0;
  ctx.result.figures["nodes_up_at_window_end"] = up1;
  ctx.result.figures["heartbeat_lag"] = lag_figures(ctx, page0, page1);

  const double down = page1.value(kLoginNodes + "\"down\"}");
  const double lagging = page1.value(kLoginNodes + "\"lagging\"}");
  const auto grown = [&](const std::string& name) { return page1.total(name) - page0.total(name); };
  const double refused = grown("imhash_config_node_links_refused_total");
  const double closed = grown("imhash_config_node_links_closed_total");
  ctx.result.say(
      format("nodes at the end of the window: up %.0f  down %.0f  lagging %.0f (config server), "
             "welcomed %lu (node_swarm); in the window: node links refused %.0f, closed %.0f",
             up1, down, lagging, welcomed, refused, closed));
  ctx.result.figures["nodes_at_window_end"] = {
      {"up", up1}, {"down", down}, {"lagging", lagging}, {"welcomed", welcomed}};
  ctx.result.figures["node_links_refused"] = refused;
  ctx.result.figures["node_links_closed"] = closed;

  // A node_swarm gone before the window's end has no CPU reading there.
  boost::json::object node_swarm{
      {"cpu_percent_of_core", nullptr}, {"exit_status", swarm_status}, {"summary", out.summary()}};
  if (s1 > 0) {
    const double swarm_cpu = 100 * (s1 - s0) / dt;
    node_swarm["cpu_percent_of_core"] = swarm_cpu;
    ctx.result.say(format("node_swarm CPU: %.1f%% of one core in the window", swarm_cpu));
  } else {
    ctx.result.say("node_swarm CPU: n/a (it was gone at the window's end)");
  }
  ctx.result.figures["node_swarm"] = std::move(node_swarm);
  ctx.result.say("   " + (out.summary().empty()
                              ? format("node_swarm printed no summary (exit status %d; %s)",
                                       swarm_status, swarm.log_path().c_str())
                              : out.summary()));
  if (swarm_status != 0) {
    ctx.result.say(
        format("node_swarm exited with status %d (%s)", swarm_status, swarm.log_path().c_str()));
  }
  ctx.result.say("   logs: " + ctx.work_dir);
}

}  // namespace

IMHASH_BENCH_SCENARIO("swarm",
                      "one config server under 10000 node links from one node_swarm process: its "
                      "CPU, RSS per node, heartbeats/s and heartbeat lag",
                      run_swarm);

}  // namespace imhash::bench::swarm
