// Scenario latency (bench.sh's bench_e2e, its open-loop part): latency at an offered 50k
// requests/s (open loop, 100k users, a 2 s warm-up of their LOGINs, then the measured seconds)
// through the e2e cluster (e2e_cluster.h), beside the same load (udp_sim --echo) against the
// yardstick udp_limit's bare echo server: what this machine's UDP path alone gives, measured in
// the same round. The simulator sleeps between sends: busy-waiting (udp_sim --busy-wait) would
// time more finely but takes a whole core, which on a small host the servers need. With --base
// the rounds alternate between the base build's cluster and this one's.
//
// Figures: {TOPOLOGY: {servers, replicas, keys, label, open_loop: ab.h's alternate() object,
// series: [{round, side, csv: udp_sim's per-second time series of the cluster's run}]}}, round
// figures p50_us, p99_us, p999_us, max_us, errors, requests_per_s, the same with echo_ before
// them, and p99_over_echo.
#include "tools/bench/ab.h"
#include "tools/bench/bench.h"
#include "tools/bench/e2e_cluster.h"
#include "tools/bench/programs.h"
#include "tools/bench/sim.h"

namespace imhash::bench {
namespace {

std::string latency_line(const UdpSimSummary& s) {
  const auto& l = s.latency_us;
  return format("p50 %5lu us  p99 %5lu us  p999 %5lu us  max %5lu us  errors %lu  (%.0f/s)",
                static_cast<unsigned long>(l.p50), static_cast<unsigned long>(l.p99),
                static_cast<unsigned long>(l.p999), static_cast<unsigned long>(l.max),
                static_cast<unsigned long>(errors_of(s)), s.requests_per_s);
}

void add(RoundFigures& f, const std::string& prefix, const UdpSimSummary& s) {
  f[prefix + "p50_us"] = static_cast<double>(s.latency_us.p50);
  f[prefix + "p99_us"] = static_cast<double>(s.latency_us.p99);
  f[prefix + "p999_us"] = static_cast<double>(s.latency_us.p999);
  f[prefix + "max_us"] = static_cast<double>(s.latency_us.max);
  f[prefix + "errors"] = static_cast<double>(errors_of(s));
  f[prefix + "requests_per_s"] = s.requests_per_s;
}

void run_latency(Context& ctx) {
  Settings& s = ctx.settings;
  const double seconds = s.real("seconds", 5, "measured seconds of each load (after the warm-up)");
  const double warmup = s.real("warmup", 2, "seconds of load before (the users' LOGINs)");
  const double rate = s.real("rate", 50000, "offered requests per second (open loop)");
  const int64_t users = s.integer("users", 100000, "simulated users");
  const std::string yardstick = s.text("yardstick", find_yardstick(ctx.source_dir),
                                       "udp_limit.c (default: ../shared/bench/ beside the repo)");
  const std::vector<E2eTopology> topologies = read_topologies(s);
  if (s.describing) return;

  const UdpLimit limit(yardstick, ctx.work_dir);
  bool tls = false;
  for (const auto& t : topologies) tls = tls || t.keys == "tls";
  const E2eSecrets secrets(ctx.work_dir, tls);
  const std::vector<std::string> load = {
      "--users",    std::to_string(users),   "--warmup", std::to_string(warmup),
      "--duration", std::to_string(seconds), "--rate",   std::to_string(rate)};
  for (const E2eTopology& topology : topologies) {
    ctx.result.say(
        format("== latency at an offered %.0f requests/s (open loop, %ld users, %g s "
               "warm-up, %g s measured), %s",
               rate, static_cast<long>(users), warmup, seconds, topology.label().c_str()));
    boost::json::array series;
    auto round = [&](const Side& side, int r) {
      RoundFigures f;
      UdpSimSummary echo;
      {
        const UdpLimit::Echo server(limit.binary());
        std::vector<std::string> args = {"--target", "127.0.0.1:" + std::to_string(server.port()),
                                         "--echo"};
        args.insert(args.end(), load.begin(), load.end());
        echo = run_sim(ctx.self.udp_sim, args, "udp_sim_echo");
      }
      add(f, "echo_", echo);
      ctx.result.say("   bare UDP echo (udp_limit server): " + latency_line(echo));
      const E2eCluster cluster(side.binaries, topology, secrets);
      std::vector<std::string> args = {"--target", cluster.target(), "--csv", "udp_sim.csv"};
      args.insert(args.end(), load.begin(), load.end());
      const UdpSimSummary sim = run_sim(ctx.self.udp_sim, args, "udp_sim");
      add(f, "", sim);
      f["p99_over_echo"] = echo.latency_us.p99 ? f["p99_us"] / f["echo_p99_us"] : 0;
      ctx.result.say("   imhash:                           " + latency_line(sim));
      series.push_back({{"round", r}, {"side", side.name}, {"csv", read_sim_csv("udp_sim.csv")}});
      return f;
    };
    boost::json::object o = topology.figures();
    o["open_loop"] = alternate(ctx, topology.name(), round);
    o["series"] = std::move(series);
    ctx.result.figures[topology.name()] = std::move(o);
  }
}

}  // namespace

IMHASH_BENCH_SCENARIO("latency",
                      "latency at an offered 50k/s (open loop) through a local cluster, beside "
                      "the same load against udp_limit's echo server; A/B-able",
                      run_latency);

}  // namespace imhash::bench
