// Scenario stream (bench.sh's bench_stream, time_stream and poll_while): a streaming move of
// `records` records between two hash servers of `shards` shards each on this host: its duration
// and records/s unthrottled (hash1 at --stream-rate 0) and at hash2's rate (`stream_rate`, the
// hash server's default); and the p99 of an open-loop load (100k users, 50k requests/s, a 2 s
// warm-up) through one login server while the rate-limited move runs, against the same load
// without a move, in one run. The cluster: a config server (heartbeat 250 ms, grace 1 s, range
// mode, the automatic purge on), hash1 and hash2 (each with a /metrics listener) and one login
// server (1 thread), through the harness's ConfigCluster. hash_bench fills hash1 (ids from 1e9);
// `imctl assign` gives them to hash2 (hash1 streams them unthrottled), then, once hash1's old
// copies are purged, the load runs without a move (polling hash2's /metrics four times a second,
// the light polling the measured move sees too), and again with the records assigned back to
// hash1 one measured second into it (hash2 streams them at its rate). A move's time is the config
// server's: from its log line for the table change to the one for the server's report of its
// stream done (both stamped to the millisecond), so the polling for the report can be slow: on a
// 2-core host fast polling costs the move and the load beside it more than the move itself. The
// load's duration is records / stream_rate + 4 s, so that it outlasts the rate-limited move.
//
// Figures: records, shards, unthrottled: {stream_rate_per_s (0), duration_s, records,
// records_per_s}, rate_limited: {the same, stream_rate_per_s hash2's}, after_purge:
// {hash1_records, hash2_records} (their /metrics after the first move's purge), load: {users,
// rate_per_s, warmup_s, duration_s}, without_move and during_move: sim.h's sim_figures
// (requests_per_s, requests, errors, no_reply, p50_us, p99_us, p999_us, max_us, elapsed_s),
// p99_with_over_without, during_move_series (udp_sim's per-second --csv series: {columns, rows}).
#include <chrono>
#include <stdexcept>

#include "harness/config_cluster.h"
#include "harness/http_get.h"
#include "harness/wait_until.h"
#include "tools/bench/background_sim.h"
#include "tools/bench/bench.h"
#include "tools/bench/config_log.h"
#include "tools/bench/hash_bench_run.h"
#include "tools/bench/sim.h"

namespace imhash::bench {
namespace {

struct Move {
  double seconds = 0;
  uint64_t records = 0;
  double per_s() const { return seconds > 0 ? static_cast<double>(records) / seconds : 0; }
};

// The move from hash server `name` after the table change to `version`: waits (bounded) for the
// config server's log to say that its stream ran against that version and finished, then reads
// the time from the change's line to that one, and the records the stream sent.
Move time_stream(const std::string& log, const std::string& name, uint64_t version) {
  const std::string done =
      "hash/" + name + ": stream done at version " + std::to_string(version) + " (";
  const std::string change = " version " + std::to_string(version) + ": ";
  bool started = false;
  double start = 0;
  Move move;
  // Complete lines only: a line still being written has no record count yet.
  const auto scan = [&] {
    started = false;
    for (const std::string& line : log_lines_from(log, 0)) {
      if (!started && line.find(change) != std::string::npos) {
        start = log_stamp_s(line);
        started = true;
      } else if (started && line.find(done) != std::string::npos) {
        move = Move{log_stamp_s(line) - start, std::stoull(line.substr(line.rfind('(') + 1))};
        return true;
      }
    }
    return false;
  };
  if (!test::wait_until(scan, std::chrono::minutes(10), std::chrono::milliseconds(250))) {
    throw std::runtime_error(started ? name + "'s stream at version " + std::to_string(version) +
                                           " did not finish in 600 s (" + log + ")"
                                     : "no table change to version " + std::to_string(version) +
                                           " in " + log);
  }
  return move;
}

// The sum of a metric's samples on the /metrics page at `address`.
double metric_at(const std::string& address, const std::string& name) {
  return test::metric(test::scrape(address), name);
}

boost::json::object move_figures(const Move& m, int64_t stream_rate) {
  return {{"stream_rate_per_s", stream_rate},
          {"duration_s", m.seconds},
          {"records", m.records},
          {"records_per_s", m.per_s()}};
}

std::string load_line(const UdpSimSummary& s) {
  return format(
      "p50 %lu us  p99 %lu us  p999 %lu us  errors %lu",
      static_cast<unsigned long>(s.latency_us.p50), static_cast<unsigned long>(s.latency_us.p99),
      static_cast<unsigned long>(s.latency_us.p999), static_cast<unsigned long>(errors_of(s)));
}

void run_stream(Context& ctx) {
  Settings& s = ctx.settings;
  const int64_t records = s.integer("records", 5000000, "records moved (each way)");
  const int64_t shards = s.integer("shards", 2, "shards of each hash server");
  const int64_t stream_rate = s.integer(
      "stream_rate", 100000,
      "hash2's --stream-rate, records/s (the hash server's default); hash1's is 0, unthrottled");
  const double rate = s.real("rate", 50000, "offered requests per second of the load (open loop)");
  const int64_t users = s.integer("users", 100000, "simulated users of the load");
  const double warmup = s.real("warmup", 2, "seconds of load before the measured ones");
  if (records < 1) throw std::invalid_argument("records: at least 1");
  if (shards < 1 || shards > 64) throw std::invalid_argument("shards: 1 to 64");
  if (stream_rate < 1) throw std::invalid_argument("stream_rate: at least 1 record/s");
  if (s.describing) return;

  // The load outlasts the rate-limited move of the records.
  const double duration = static_cast<double>(records / stream_rate + 4);
  const InDirectory in(ctx.work_dir + "/stream");
  test::ConfigClusterOptions o;
  o.binaries = ctx.self;
  o.shards = static_cast<int>(shards);
  o.login_threads = 1;
  o.heartbeat_ms = 250;
  o.grace_ms = 1000;
  o.initial_mode = "range";
  o.metrics = true;
  o.hash_args = {{1, {"--stream-rate", "0", "--log-level", "warn"}},
                 {2, {"--stream-rate", std::to_string(stream_rate), "--log-level", "warn"}}};
  test::ConfigCluster cluster(o);
  const std::string target = "127.0.0.1:" + std::to_string(cluster.start_serving(2));
  const std::string m1 = cluster.hash_metrics(1), m2 = cluster.hash_metrics(2);
  const std::string log = cluster.config().log_path();

  ctx.result.say(
      format("== streaming moves of %ld records between two hash servers (%ld shard(s) each) on "
             "this host",
             static_cast<long>(records), static_cast<long>(shards)));
  const FilledIds filled = fill_ids_above_users(ctx.self.hash_bench, cluster.hash_address(1),
                                                cluster.hash(1).pid(), records, ctx.result);
  const std::string& range = filled.range;
  auto assign = [&](const std::string& server) {
    const boost::json::value r = cluster.imctl_json({"assign", range, server});
    return r.as_object().at("version").to_number<uint64_t>();
  };

  // hash1 streams them to hash2 as fast as the links go.
  const Move fast = time_stream(log, "hash1", assign("hash2"));
  ctx.result.say(format("unthrottled (--stream-rate 0): %lu records in %.2f s: %.0f records/s",
                        static_cast<unsigned long>(fast.records), fast.seconds, fast.per_s()));
  // The old copies go with the automatic purge once the stream is done and the grace is over
  // (bounded; the counts are reported either way, as bench.sh did).
  const double n = static_cast<double>(records);
  test::wait_until(
      [&] {
        return metric_at(m1, "imhash_hash_records") < 1000 &&
               metric_at(m2, "imhash_hash_records") >= n;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(100));
  const double left1 = metric_at(m1, "imhash_hash_records");
  const double held2 = metric_at(m2, "imhash_hash_records");
  ctx.result.say(format("   hash1 after its purge: %.0f records, hash2: %.0f", left1, held2));

  const std::vector<std::string> load = {"--target",   target,
                                         "--users",    std::to_string(users),
                                         "--warmup",   std::to_string(warmup),
                                         "--duration", std::to_string(duration),
                                         "--rate",     std::to_string(rate)};
  const double own_s = warmup + duration;
  UdpSimSummary base;
  {
    BackgroundSim sim(ctx.self.udp_sim, load, "udp_sim_base", own_s);
    // The same light polling of hash2's /metrics as the move's measurement sees of the log.
    test::wait_until(
        [&] {
          metric_at(m2, "imhash_stream_running");
          return !sim.running();
        },
        std::chrono::milliseconds(static_cast<int64_t>(own_s * 1000)) + std::chrono::minutes(1),
        std::chrono::milliseconds(250));
    base = sim.wait();
  }
  BackgroundSim during(ctx.self.udp_sim, load, "udp_sim_move", own_s);
  during.wait_first_second();  // past the warm-up
  // Back to hash1, at hash2's rate.
  const Move slow = time_stream(log, "hash2", assign("hash1"));
  const UdpSimSummary with = during.wait();
  ctx.result.say(
      format("rate %ld/s (hash2's --stream-rate): %lu records in %.2f s: %.0f records/s (under "
             "a %.0f/s load)",
             static_cast<long>(stream_rate), static_cast<unsigned long>(slow.records), slow.seconds,
             slow.per_s(), rate));
  const double ratio = base.latency_us.p99 ? static_cast<double>(with.latency_us.p99) /
                                                 static_cast<double>(base.latency_us.p99)
                                           : 0;
  ctx.result.say(
      format("== a %.0f/s open-loop load (%ld users, %.0f s measured after a %g s warm-up)", rate,
             static_cast<long>(users), duration, warmup));
  ctx.result.say("without a move:              " + load_line(base));
  ctx.result.say("during a default-rate move:  " + load_line(with));
  ctx.result.say(format("p99 ratio with/without the move: %.2f", ratio));

  auto& f = ctx.result.figures;
  f["records"] = records;
  f["shards"] = shards;
  f["unthrottled"] = move_figures(fast, 0);
  f["rate_limited"] = move_figures(slow, stream_rate);
  f["after_purge"] = {{"hash1_records", left1}, {"hash2_records", held2}};
  f["load"] = {
      {"users", users}, {"rate_per_s", rate}, {"warmup_s", warmup}, {"duration_s", duration}};
  f["without_move"] = sim_figures(base);
  f["during_move"] = sim_figures(with);
  f["p99_with_over_without"] = ratio;
  f["during_move_series"] = during.series();
}

}  // namespace

IMHASH_BENCH_SCENARIO("stream",
                      "a streaming move of 5M records between two hash servers: duration and "
                      "records/s unthrottled and at the default rate; p99 of a 50k/s load during "
                      "the move against without",
                      run_stream);

}  // namespace imhash::bench
