// Scenario hash (bench.sh's bench_rates and bench_rates_ab): operations per second through one
// hash server on loopback with pipelining (tools/hash_bench: 50 connections, 16 requests in
// flight each), beside redis-benchmark against a local redis-server in the same round (its
// request count sized to about the same duration); and with --base, GET and UPSERT at `records`
// records, the base build's hash server against this one's, alternated (each fills the records,
// then hash_bench times UPSERTs of those ids and GETs over all of them, with the server's CPU
// time per request, steadier than the rate on a shared machine). The load generator needs a core
// of its own, as redis-benchmark does beside the single-threaded redis-server: the hash server
// gets the others (at least one shard).
//
// Figures: rates: {shards, rounds: [{round, imhash_set_per_s, imhash_get_per_s, redis_set_per_s,
// redis_get_per_s, ratio_set, ratio_get}]}; ab (with --base): ab.h's alternate() object, round
// figures upsert_per_s, get_per_s, upsert_cpu_us, get_cpu_us, bytes_per_record.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "tools/bench/ab.h"
#include "tools/bench/bench.h"
#include "tools/bench/hash_bench_run.h"
#include "tools/bench/programs.h"

namespace imhash::bench {
namespace {

struct HashSettings {
  double seconds;
  int64_t records, shards, connections, pipeline;
  std::vector<std::string> parts;
};

// redis-benchmark -q's "SET: 123456.78 requests per second, p50=..." (after its \r progress).
double redis_rate(const std::string& out, const std::string& test) {
  std::string text = out;
  std::replace(text.begin(), text.end(), '\r', '\n');
  std::istringstream in(text);
  double rate = 0;
  for (std::string line; std::getline(in, line);) {
    // Progress lines ("SET: rps=12.0 (overall: ...)") come first; the final one has the rate.
    double v = 0;
    if (line.rfind(test + ": ", 0) == 0 && line.find("requests per second") != std::string::npos &&
        std::sscanf(line.c_str() + test.size() + 2, "%lf", &v) == 1) {
      rate = v;
    }
  }
  return rate;
}

void rates(Context& ctx, const HashSettings& h) {
  ctx.result.say(
      format("== hash server (%ld shards) vs redis-server: %ld connections, pipeline "
             "%ld, %g s per phase, %ld cores",
             static_cast<long>(h.shards), static_cast<long>(h.connections),
             static_cast<long>(h.pipeline), h.seconds, sysconf(_SC_NPROCESSORS_ONLN)));
  const std::vector<std::string> load = {"-c",         std::to_string(h.connections),
                                         "-P",         std::to_string(h.pipeline),
                                         "--duration", std::to_string(h.seconds)};
  boost::json::array rounds;
  for (int r = 1; r <= ctx.rounds; ++r) {
    const InDirectory in(ctx.work_dir + "/rates-round" + std::to_string(r));
    HashBenchRates mine;
    {
      const Daemon hash = start_daemon(ctx.self.hash_server, hash_server_args(h.shards));
      mine = hash_bench_rates(ctx.self.hash_bench, hash.addresses[0], load, h.seconds);
    }
    double redis_set = 0, redis_get = 0;
    {
      Redis redis;
      const int64_t requests = static_cast<int64_t>(h.seconds * 400000);
      const std::string out = run_ok(
          which("redis-benchmark"),
          {"-p", std::to_string(redis.port()), "-P", std::to_string(h.pipeline), "-c",
           std::to_string(h.connections), "-t", "set,get", "-n", std::to_string(requests), "-q"},
          std::chrono::milliseconds(static_cast<int64_t>(h.seconds * 20000) + 60000));
      redis_set = redis_rate(out, "SET");
      redis_get = redis_rate(out, "GET");
    }
    const double ratio_set = redis_set > 0 ? mine.set_per_s / redis_set : 0;
    const double ratio_get = redis_get > 0 ? mine.get_per_s / redis_get : 0;
    ctx.result.say(
        format("round %d  imhash SET %10.0f GET %10.0f   redis SET %10.0f GET %10.0f   "
               "ratio SET %.2f GET %.2f",
               r, mine.set_per_s, mine.get_per_s, redis_set, redis_get, ratio_set, ratio_get));
    rounds.push_back({{"round", r},
                      {"imhash_set_per_s", mine.set_per_s},
                      {"imhash_get_per_s", mine.get_per_s},
                      {"redis_set_per_s", redis_set},
                      {"redis_get_per_s", redis_get},
                      {"ratio_set", ratio_set},
                      {"ratio_get", ratio_get}});
  }
  ctx.result.figures["rates"] = {{"shards", h.shards}, {"rounds", std::move(rounds)}};
}

void ab(Context& ctx, const HashSettings& h) {
  if (!ctx.base) {
    ctx.result.say("== GET/UPSERT A/B: skipped (no --base build)");
    return;
  }
  ctx.result.say(
      format("== GET and UPSERT with %ld records: %s (base) vs %s (self), %ld shard(s), "
             "%ld connections, pipeline %ld, %g s per phase",
             static_cast<long>(h.records), ctx.base_dir.c_str(), ctx.self_dir.c_str(),
             static_cast<long>(h.shards), static_cast<long>(h.connections),
             static_cast<long>(h.pipeline), h.seconds));
  auto round = [&](const Side& side, int) {
    const Daemon hash = start_daemon(side.binaries.hash_server, hash_server_args(h.shards));
    // The load generator is this build's for both sides.
    const FillReport fill = hash_bench_fill(ctx.self.hash_bench, hash.addresses[0], hash.pid(),
                                            {"--fill", std::to_string(h.records)});
    const HashBenchRates r =
        hash_bench_rates(ctx.self.hash_bench, hash.addresses[0],
                         {"-c", std::to_string(h.connections), "-P", std::to_string(h.pipeline),
                          "--keys", std::to_string(h.records), "--duration",
                          std::to_string(h.seconds), "--pid", std::to_string(hash.pid())},
                         h.seconds);
    return RoundFigures{
        {"upsert_per_s", r.set_per_s},
        {"get_per_s", r.get_per_s},
        {"upsert_cpu_us", r.set_cpu_us},
        {"get_cpu_us", r.get_cpu_us},
        {"bytes_per_record", fill.levels.empty() ? 0 : fill.levels.back().bytes_per_record}};
  };
  ctx.result.figures["ab"] = alternate(ctx, "ab", round);
}

void run_hash(Context& ctx) {
  Settings& s = ctx.settings;
  const int64_t cores = sysconf(_SC_NPROCESSORS_ONLN);
  HashSettings h;
  h.seconds = s.real("seconds", 5, "seconds per phase (UPSERT, GET)");
  h.records = s.integer("records", 10000000, "records held during the A/B (--base)");
  h.shards = s.integer("shards", std::max<int64_t>(cores - 1, 1),
                       "the hash server's shards (default: the cores less one, for the load)");
  h.connections = s.integer("connections", 50, "connections of hash_bench and redis-benchmark");
  h.pipeline = s.integer("pipeline", 16, "requests in flight per connection");
  h.parts = s.words("parts", "rates,ab", "which parts: rates (vs redis), ab (with --base)");
  for (const std::string& part : h.parts) {
    if (part != "rates" && part != "ab") {
      throw std::invalid_argument("parts: no part " + part + " (rates, ab)");
    }
  }
  if (s.describing) return;
  for (const std::string& part : h.parts) {
    if (part == "rates") rates(ctx, h);
    if (part == "ab") ab(ctx, h);
  }
}

}  // namespace

IMHASH_BENCH_SCENARIO("hash",
                      "hash_bench through one hash server vs redis-benchmark; with --base the "
                      "GET/UPSERT A/B at N records",
                      run_hash);

}  // namespace imhash::bench
