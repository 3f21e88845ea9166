#include "tools/bench/hash_bench_run.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include "tools/bench/programs.h"

namespace imhash::bench {

HashBenchRates hash_bench_rates(const std::string& hash_bench, const std::string& target,
                                std::vector<std::string> args, double seconds) {
  args.insert(args.begin(), {"--target", target});
  // Two phases of `seconds` (UPSERT, then GET), and connection set-up.
  const auto bound = std::chrono::milliseconds(static_cast<int64_t>(2 * seconds * 1000) + 60000);
  std::istringstream out(run_ok(hash_bench, std::move(args), bound));
  HashBenchRates r;
  for (std::string line; std::getline(out, line);) {
    std::sscanf(line.c_str(), "SET: %lf", &r.set_per_s);
    std::sscanf(line.c_str(), "GET: %lf", &r.get_per_s);
    std::sscanf(line.c_str(), "SET_CPU: %lf", &r.set_cpu_us);
    std::sscanf(line.c_str(), "GET_CPU: %lf", &r.get_cpu_us);
  }
  return r;
}

FillReport hash_bench_fill(const std::string& hash_bench, const std::string& target, pid_t pid,
                           std::vector<std::string> args) {
  args.insert(args.begin(), {"--target", target, "--pid", std::to_string(pid)});
  // Its own pace bounds it (a few million records a second on loopback): an hour is "stuck".
  std::istringstream out(run_ok(hash_bench, std::move(args), std::chrono::hours(1)));
  FillReport r;
  for (std::string line; std::getline(out, line);) {
    FillLevel l;
    unsigned long long n = 0, before = 0, after = 0;
    if (std::sscanf(line.c_str(),
                    "records %llu rss_before %llu rss_after %llu bytes_per_record %lf", &n, &before,
                    &after, &l.bytes_per_record) == 4) {
      l.records = n;
      l.rss_before = before;
      l.rss_after = after;
      r.levels.push_back(l);
    } else if (std::sscanf(
                   line.c_str(),
                   "after purge: records %llu rss_after %llu bytes_per_remaining_record %lf", &n,
                   &after, &r.bytes_per_remaining_record) == 3) {
      r.purged = true;
      r.left = n;
      r.rss_after_purge = after;
    }
  }
  return r;
}

std::vector<std::string> hash_server_args(int64_t shards) {
  return {"--listen", "127.0.0.1:0", "--shards", std::to_string(shards), "--log-level", "warn"};
}

FilledIds fill_ids_above_users(const std::string& hash_bench, const std::string& target, pid_t pid,
                               int64_t records, Result& result) {
  constexpr uint64_t kFirstId = 1000000000;
  FilledIds out;
  out.fill =
      hash_bench_fill(hash_bench, target, pid,
                      {"--fill", std::to_string(records), "--first-id", std::to_string(kFirstId)});
  for (const FillLevel& l : out.fill.levels) {
    result.say(format("   fill: records %lu  rss_before %lu  rss_after %lu  bytes_per_record %.1f",
                      static_cast<unsigned long>(l.records),
                      static_cast<unsigned long>(l.rss_before),
                      static_cast<unsigned long>(l.rss_after), l.bytes_per_record));
  }
  out.range = std::to_string(kFirstId) + "-" +
              std::to_string(kFirstId + static_cast<uint64_t>(records) - 1);
  return out;
}

}  // namespace imhash::bench
