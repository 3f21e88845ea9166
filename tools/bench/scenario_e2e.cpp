// Scenario e2e (bench.sh's bench_e2e, its closed-loop part): udp_sim against a local cluster
// (1, then 3 hash servers of 1 shard; 1 login server of 1 thread), closed loop (window 64, one
// source socket, 48-byte requests), and the yardstick ../shared/bench/udp_limit.c's client
// against its bare echo server back to back in each round: both rates and their ratio, which is
// what to quote on a shared machine (an absolute rate follows the neighbours). With --base, the
// rounds alternate between the base build's cluster and this one's (the load generator and the
// yardstick are this build's for both): the e2e A/B.
//
// Figures: {TOPOLOGY: {servers, replicas, keys, label, closed_loop: ab.h's alternate() object}}
// with round figures requests_per_s, udp_limit_round_trips_per_s, ratio_to_udp_limit, p99_us,
// errors; and series: [{round, side, csv: udp_sim's per-second time series}]. Each round starts a
// fresh cluster (its logs in TOPOLOGY-SIDE-roundN/).
#include "tools/bench/ab.h"
#include "tools/bench/bench.h"
#include "tools/bench/e2e_cluster.h"
#include "tools/bench/programs.h"
#include "tools/bench/sim.h"

namespace imhash::bench {
namespace {

void run_e2e(Context& ctx) {
  Settings& s = ctx.settings;
  const double seconds = s.real("seconds", 5, "seconds of each measurement (udp_sim, udp_limit)");
  const int64_t users = s.integer("users", 100000, "simulated users");
  const int64_t window = s.integer("window", 64, "requests in flight (udp_sim and udp_limit)");
  const std::string yardstick = s.text("yardstick", find_yardstick(ctx.source_dir),
                                       "udp_limit.c (default: ../shared/bench/ beside the repo)");
  const std::vector<E2eTopology> topologies = read_topologies(s);
  if (s.describing) return;

  UdpLimit limit(yardstick, ctx.work_dir);
  bool tls = false;
  for (const auto& t : topologies) tls = tls || t.keys == "tls";
  const E2eSecrets secrets(ctx.work_dir, tls);
  for (const E2eTopology& topology : topologies) {
    ctx.result.say(
        format("== end to end, %s: udp_sim (closed loop, window %ld, one source "
               "socket) vs udp_limit, %g s each",
               topology.label().c_str(), static_cast<long>(window), seconds));
    boost::json::array series;
    auto round = [&](const Side& side, int r) {
      RoundFigures f;
      f["udp_limit_round_trips_per_s"] = limit.round_trips_per_s(seconds, static_cast<int>(window));
      const E2eCluster cluster(side.binaries, topology, secrets);
      // One source socket, as the yardstick's client has: the login server runs one thread, so
      // more sockets would only add system calls to the load generator sharing these cores.
      const UdpSimSummary sim =
          run_sim(ctx.self.udp_sim,
                  {"--target", cluster.target(), "--users", std::to_string(users), "--duration",
                   std::to_string(seconds), "--window", std::to_string(window), "--sockets", "1",
                   "--csv", "udp_sim.csv"},
                  "udp_sim");
      f["requests_per_s"] = sim.requests_per_s;
      f["ratio_to_udp_limit"] = sim.requests_per_s / f["udp_limit_round_trips_per_s"];
      f["p99_us"] = static_cast<double>(sim.latency_us.p99);
      f["errors"] = static_cast<double>(errors_of(sim));
      ctx.result.say(
          format("   imhash %8.0f requests/s   udp_limit %8.0f round trips/s   ratio "
                 "%.2f   (p99 %lu us)",
                 sim.requests_per_s, f["udp_limit_round_trips_per_s"], f["ratio_to_udp_limit"],
                 static_cast<unsigned long>(sim.latency_us.p99)));
      series.push_back({{"round", r}, {"side", side.name}, {"csv", read_sim_csv("udp_sim.csv")}});
      return f;
    };
    boost::json::object o = topology.figures();
    o["closed_loop"] = alternate(ctx, topology.name(), round);
    o["series"] = std::move(series);
    ctx.result.figures[topology.name()] = std::move(o);
  }
}

}  // namespace

IMHASH_BENCH_SCENARIO("e2e",
                      "udp_sim through a local cluster (1, 3 hash servers) vs the udp_limit "
                      "yardstick, closed loop; with --base the e2e A/B",
                      run_e2e);

}  // namespace imhash::bench
