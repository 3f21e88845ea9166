// Scenario memory (bench.sh's bench_memory and bench_purge_memory): bytes per record at each fill
// level, IPv4 then IPv6: one hash server (2 shards), records added level by level from the same
// baseline (tools/hash_bench --fill-levels, the server's RSS growth), beside redis-server with
// keys "user:N" holding a value of the same information (18 bytes for IPv4: id 8, address 4,
// port 2, last seen 4; 30 for IPv6), filled with DEBUG POPULATE. Then the shrink case: `records`
// records of which 90% are written an hour old, then PURGE OLDER_THAN on each shard (the purge's
// own scan, through the protocol); redis: the same keys, 90% deleted by a script, then MEMORY
// PURGE (jemalloc gives back what it can), its RSS read once it has settled.
//
// Figures: fill: {ipv4|ipv6: {value_bytes, levels: [{records, imhash_bytes_per_record,
// redis_bytes_per_record}], worst_imhash_bytes_per_record}}; purge: {records, aged_percent,
// imhash: {bytes_per_record, records_left, bytes_per_remaining_record}, redis: {the same}}.
#include <chrono>

#include "harness/wait_until.h"
#include "tools/bench/bench.h"
#include "tools/bench/hash_bench_run.h"
#include "tools/bench/programs.h"

namespace imhash::bench {
namespace {

struct MemorySettings {
  std::vector<int64_t> levels;
  std::vector<std::string> families, parts;
  int64_t records, aged_percent, shards;
};

std::string joined(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t n : v) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

// Redis's RSS once MEMORY PURGE's effect has settled: two readings 100 ms apart that agree
// (bounded: after 10 s, the last reading).
uint64_t settled_rss(Redis& redis) {
  uint64_t last = redis.rss();
  test::wait_until(
      [&] {
        const uint64_t now = redis.rss();
        const bool same = now == last;
        last = now;
        return same;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(100));
  return last;
}

void fill(Context& ctx, const MemorySettings& m, const std::string& family) {
  const bool v6 = family == "ipv6";
  const int value = v6 ? 30 : 18;
  ctx.result.say(
      format("== memory per %s record, fill levels %s: one hash server (%ld shards) vs "
             "redis-server (%d-byte values)",
             v6 ? "IPv6" : "IPv4", joined(m.levels).c_str(), static_cast<long>(m.shards), value));
  const InDirectory in(ctx.work_dir + "/fill-" + family);
  FillReport mine;
  {
    const Daemon hash = start_daemon(ctx.self.hash_server, hash_server_args(m.shards));
    std::vector<std::string> args = {"--fill-levels", joined(m.levels)};
    if (v6) args.push_back("--ipv6");
    mine = hash_bench_fill(ctx.self.hash_bench, hash.addresses[0], hash.pid(), args);
  }
  Redis redis({"--enable-debug-command", "yes"});
  const uint64_t before = redis.rss();
  boost::json::array levels;
  double worst = 0;
  ctx.result.say(
      format("%12s  %22s  %22s", "records", "imhash bytes/record", "redis bytes/record"));
  for (size_t i = 0; i < m.levels.size(); ++i) {
    const int64_t n = m.levels[i];
    redis.cli({"debug", "populate", std::to_string(n), "user", std::to_string(value)});
    const double theirs =
        (static_cast<double>(redis.rss()) - static_cast<double>(before)) / static_cast<double>(n);
    const double ours = i < mine.levels.size() ? mine.levels[i].bytes_per_record : 0;
    worst = std::max(worst, ours);
    ctx.result.say(format("%12ld  %22.1f  %22.1f", static_cast<long>(n), ours, theirs));
    levels.push_back(
        {{"records", n}, {"imhash_bytes_per_record", ours}, {"redis_bytes_per_record", theirs}});
  }
  ctx.result.say(format("worst imhash %s bytes per record: %.1f", v6 ? "IPv6" : "IPv4", worst));
  auto& out = ctx.result.figures["fill"];
  if (!out.is_object()) out = boost::json::object{};
  out.as_object()[family] = {{"value_bytes", value},
                             {"levels", std::move(levels)},
                             {"worst_imhash_bytes_per_record", worst}};
}

void purge(Context& ctx, const MemorySettings& m) {
  const int64_t n = m.records;
  ctx.result.say(
      format("== after a purge of %ld%% of %ld IPv4 records: one hash server (%ld "
             "shards) vs redis-server",
             static_cast<long>(m.aged_percent), static_cast<long>(n), static_cast<long>(m.shards)));
  const InDirectory in(ctx.work_dir + "/purge");
  FillReport mine;
  {
    const Daemon hash = start_daemon(ctx.self.hash_server, hash_server_args(m.shards));
    mine = hash_bench_fill(ctx.self.hash_bench, hash.addresses[0], hash.pid(),
                           {"--fill", std::to_string(n), "--aged-percent",
                            std::to_string(m.aged_percent), "--purge-aged"});
  }
  const double mine_full = mine.levels.empty() ? 0 : mine.levels.back().bytes_per_record;
  ctx.result.say(
      format("imhash: records %ld  bytes_per_record %.1f; after the purge: records %lu  "
             "bytes_per_remaining_record %.1f",
             static_cast<long>(n), mine_full, static_cast<unsigned long>(mine.left),
             mine.bytes_per_remaining_record));
  Redis redis({"--enable-debug-command", "yes"});
  const double before = static_cast<double>(redis.rss());
  redis.cli({"debug", "populate", std::to_string(n), "user", "18"});
  const double full = static_cast<double>(redis.rss());
  // Deletes as hash_bench ages: the ids whose last two digits are below aged_percent.
  redis.cli({"eval",
             "for i = 0, ARGV[1] - 1 do if i % 100 < tonumber(ARGV[2]) then redis.call('DEL', "
             "'user:' .. i) end end",
             "0", std::to_string(n), std::to_string(m.aged_percent)});
  redis.cli({"memory", "purge"});
  const double after = static_cast<double>(settled_rss(redis));
  const uint64_t left = std::stoull(redis.cli({"dbsize"}));
  const double theirs_full = (full - before) / static_cast<double>(n);
  const double theirs_left = left ? (after - before) / static_cast<double>(left) : 0;
  ctx.result.say(
      format("redis:  records %ld  bytes_per_record %.1f; after deleting %ld%%: records "
             "%lu  bytes_per_remaining_record %.1f",
             static_cast<long>(n), theirs_full, static_cast<long>(m.aged_percent),
             static_cast<unsigned long>(left), theirs_left));
  ctx.result.figures["purge"] = {
      {"records", n},
      {"aged_percent", m.aged_percent},
      {"imhash",
       {{"bytes_per_record", mine_full},
        {"records_left", mine.left},
        {"bytes_per_remaining_record", mine.bytes_per_remaining_record}}},
      {"redis",
       {{"bytes_per_record", theirs_full},
        {"records_left", left},
        {"bytes_per_remaining_record", theirs_left}}}};
}

void run_memory(Context& ctx) {
  Settings& s = ctx.settings;
  MemorySettings m;
  m.levels = s.integers("levels", "2000000,3300000,5000000,6500000,9000000,12000000",
                        "fill levels (records, increasing)");
  m.families = s.words("families", "ipv4,ipv6", "address families of the fill: ipv4, ipv6");
  m.records = s.integer("records", 10000000, "records before the purge");
  m.aged_percent = s.integer("aged_percent", 90, "percent of them purged");
  m.shards = s.integer("shards", 2, "the hash server's shards");
  m.parts = s.words("parts", "fill,purge", "which parts: fill (levels), purge");
  for (const std::string& f : m.families) {
    if (f != "ipv4" && f != "ipv6") throw std::invalid_argument("families: ipv4, ipv6, not " + f);
  }
  for (const std::string& p : m.parts) {
    if (p != "fill" && p != "purge") throw std::invalid_argument("parts: fill, purge, not " + p);
  }
  for (size_t i = 0; i < m.levels.size(); ++i) {
    if (m.levels[i] <= 0 || (i > 0 && m.levels[i] <= m.levels[i - 1])) {
      throw std::invalid_argument("levels: increasing record counts");
    }
  }
  if (m.aged_percent < 0 || m.aged_percent > 100) {
    throw std::invalid_argument("aged_percent: 0 to 100");
  }
  if (s.describing) return;
  for (const std::string& part : m.parts) {
    if (part == "fill") {
      for (const std::string& f : m.families) fill(ctx, m, f);
    } else {
      purge(ctx, m);
    }
  }
}

}  // namespace

IMHASH_BENCH_SCENARIO("memory",
                      "bytes per record at fill levels (IPv4, IPv6) and after a purge of 90%, "
                      "beside redis-server",
                      run_memory);

}  // namespace imhash::bench
