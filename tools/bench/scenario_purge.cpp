// Scenario purge (bench.sh's bench_purge): the p99 of an open-loop load (100k users, 50k
// requests/s) through one login server while the hash server serving it purges `records` records
// it no longer owns, against the same load without a purge, in one run; and the time each new
// table version took to reach every node (the config server's log). The cluster: a config server
// (heartbeat 250 ms, grace 1 s, the automatic purge off, range mode), hash1 and hash2 (1 shard
// each) and one login server (1 thread), through the harness's ConfigCluster. hash_bench fills
// hash1 with the records (ids from 1e9); the load without a purge runs first; then the records
// are assigned to hash2 (hash1 no longer owns them), the load runs again, and one measured second
// into it `imctl purge hash1 --not-owned` starts the purge, timed until `imctl purge --status`
// says every shard of hash1 is done. As in bench.sh, the assign also starts hash1's stream of
// those records to hash2 (at its default rate), which the purge cuts short.
//
// Figures: records, load: {users, rate_per_s, duration_s}, fill_bytes_per_record,
// without_purge and with_purge: sim.h's sim_figures (requests_per_s, requests, errors, no_reply,
// p50_us, p99_us, p999_us, max_us, elapsed_s), purge_s, purged_records (what hash1's shards
// deleted), p99_with_over_without, with_purge_series (udp_sim's per-second --csv series:
// {columns, rows}), table_versions: [{version, reached_every_node_ms}].
#include <chrono>
#include <regex>
#include <stdexcept>

#include "harness/config_cluster.h"
#include "harness/wait_until.h"
#include "tools/bench/background_sim.h"
#include "tools/bench/bench.h"
#include "tools/bench/config_log.h"
#include "tools/bench/hash_bench_run.h"
#include "tools/bench/sim.h"

namespace imhash::bench {
namespace {

std::string percentiles(const UdpSimSummary& s) {
  return format("p50 %lu us  p99 %lu us  p999 %lu us", static_cast<unsigned long>(s.latency_us.p50),
                static_cast<unsigned long>(s.latency_us.p99),
                static_cast<unsigned long>(s.latency_us.p999));
}

// hash1's purges as `imctl purge --status` shows them: whether each of its `shards` shards has
// reported its purge done, and the records they deleted.
bool purge_done(test::ConfigCluster& cluster, int shards, uint64_t& deleted) {
  const boost::json::value status = cluster.imctl_json({"purge", "hash1", "--status"});
  int done = 0;
  deleted = 0;
  for (const auto& p : status.as_object().at("purges").as_array()) {
    const auto& o = p.as_object();
    if (o.at("server").as_string() != "hash1") continue;
    if (o.at("state").as_string() != "done") return false;
    ++done;
    deleted += o.at("deleted").to_number<uint64_t>();
  }
  return done >= shards;
}

// The config server's "version N reached every node in X ms" lines, in order.
boost::json::array table_versions(const std::string& log) {
  static const std::regex line(R"(version (\d+) reached every node in ([0-9.]+) ms)");
  boost::json::array out;
  for (const std::string& text : log_lines_from(log, 0)) {
    std::smatch m;
    if (std::regex_search(text, m, line)) {
      out.push_back(
          {{"version", std::stoull(m[1].str())}, {"reached_every_node_ms", std::stod(m[2].str())}});
    }
  }
  return out;
}

void run_purge(Context& ctx) {
  Settings& s = ctx.settings;
  const int64_t records = s.integer("records", 5000000, "records hash1 holds and then purges");
  if (records < 1) throw std::invalid_argument("records: at least 1");
  const int64_t users = s.integer("users", 100000, "simulated users of the load");
  const double rate = s.real("rate", 50000, "offered requests per second of the load (open loop)");
  const double seconds = s.real("seconds", 5, "seconds of each load (no warm-up)");
  if (s.describing) return;

  constexpr int kShards = 1;
  const InDirectory in(ctx.work_dir + "/purge");
  test::ConfigClusterOptions o;
  o.binaries = ctx.self;
  o.shards = kShards;
  o.login_threads = 1;
  o.heartbeat_ms = 250;
  o.grace_ms = 1000;
  o.initial_mode = "range";
  o.config_args = {"--auto-purge", "off"};
  o.hash_args = {{1, {"--log-level", "warn"}}, {2, {"--log-level", "warn"}}};
  test::ConfigCluster cluster(o);
  const std::string target = "127.0.0.1:" + std::to_string(cluster.start_serving(2));

  ctx.result.say(
      format("== purge under load: one hash server (%d shard) serves %ld users at an offered "
             "%.0f/s",
             kShards, static_cast<long>(users), rate));
  ctx.result.say(format("   and holds %ld more records, which it purges in the second run",
                        static_cast<long>(records)));
  const FilledIds filled = fill_ids_above_users(ctx.self.hash_bench, cluster.hash_address(1),
                                                cluster.hash(1).pid(), records, ctx.result);
  const FillReport& fill = filled.fill;
  const double fill_bpr = fill.levels.empty() ? 0 : fill.levels.back().bytes_per_record;

  const std::vector<std::string> load = {"--target",   target,
                                         "--users",    std::to_string(users),
                                         "--duration", std::to_string(seconds),
                                         "--rate",     std::to_string(rate)};
  const UdpSimSummary base = run_sim(ctx.self.udp_sim, load, "udp_sim_base");
  // hash1 no longer owns them.
  cluster.imctl_json({"assign", filled.range, "hash2"});

  BackgroundSim during(ctx.self.udp_sim, load, "udp_sim_purge", seconds);
  during.wait_first_second();
  const auto t0 = std::chrono::steady_clock::now();
  cluster.imctl_json({"purge", "hash1", "--not-owned"});
  uint64_t deleted = 0;
  // A purge scans its shard at a few million records a second: ten minutes is "stuck".
  if (!test::wait_until([&] { return purge_done(cluster, kShards, deleted); },
                        std::chrono::minutes(10), std::chrono::milliseconds(50))) {
    throw std::runtime_error("hash1's purge did not finish in 10 minutes");
  }
  const double purge_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const UdpSimSummary with = during.wait();

  const double ratio = base.latency_us.p99 ? static_cast<double>(with.latency_us.p99) /
                                                 static_cast<double>(base.latency_us.p99)
                                           : 0;
  ctx.result.say("without purge: " + percentiles(base));
  ctx.result.say(format("with purge:    %s  (purge of %ld records took %.2f s)",
                        percentiles(with).c_str(), static_cast<long>(records), purge_s));
  ctx.result.say(format("p99 ratio with/without purge: %.2f", ratio));
  ctx.result.say("per-second p99 while the purge ran (udp_sim's per-second series):");
  boost::json::object series = during.series();
  const auto& columns = series.at("columns").as_array();
  auto column = [&](std::string_view name) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i].is_string() && columns[i].as_string() == name) return i;
    }
    throw std::runtime_error("udp_sim's --csv has no column " + std::string(name));
  };
  const size_t at_s = column("elapsed_s"), at_p50 = column("p50_us"), at_p99 = column("p99_us");
  for (const auto& row : series.at("rows").as_array()) {
    const auto& r = row.as_array();
    if (r.size() <= std::max({at_s, at_p50, at_p99})) continue;
    ctx.result.say(format("   [%6.1fs] p50 %.0fus p99 %.0fus", r[at_s].to_number<double>(),
                          r[at_p50].to_number<double>(), r[at_p99].to_number<double>()));
  }

  ctx.result.say("== time for a new table version to reach every node (config server log)");
  boost::json::array versions = table_versions(cluster.config().log_path());
  for (const auto& v : versions) {
    ctx.result.say(format("   version %lu reached every node in %.1f ms",
                          static_cast<unsigned long>(v.at("version").to_number<uint64_t>()),
                          v.at("reached_every_node_ms").to_number<double>()));
  }

  auto& f = ctx.result.figures;
  f["records"] = records;
  f["load"] = {{"users", users}, {"rate_per_s", rate}, {"duration_s", seconds}};
  f["fill_bytes_per_record"] = fill_bpr;
  f["without_purge"] = sim_figures(base);
  f["with_purge"] = sim_figures(with);
  f["purge_s"] = purge_s;
  f["purged_records"] = deleted;
  f["p99_with_over_without"] = ratio;
  f["with_purge_series"] = std::move(series);
  f["table_versions"] = std::move(versions);
}

}  // namespace

IMHASH_BENCH_SCENARIO("purge",
                      "p99 of a 50k/s open-loop load while its hash server purges 5M records it "
                      "no longer owns, against the same load without; table convergence times",
                      run_purge);

}  // namespace imhash::bench
