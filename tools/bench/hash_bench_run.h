// tools/hash_bench for the hash and memory scenarios: runs it against one hash server and reads
// its lines ("SET: N requests per second", "GET_CPU: X us of server CPU per request",
// "records N  rss_before A  rss_after B  bytes_per_record X", "after purge: records N ...").
// Main thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench/bench.h"

namespace imhash::bench {

struct HashBenchRates {
  double set_per_s = 0, get_per_s = 0;
  double set_cpu_us = 0, get_cpu_us = 0;  // with a pid: the server's CPU per request
};

struct FillLevel {
  uint64_t records = 0;
  uint64_t rss_before = 0, rss_after = 0;
  double bytes_per_record = 0;
};

struct FillReport {
  std::vector<FillLevel> levels;
  // After --purge-aged.
  bool purged = false;
  uint64_t left = 0, rss_after_purge = 0;
  double bytes_per_remaining_record = 0;
};

// The flags of the one hash server the hash and memory scenarios measure: loopback, port 0,
// `shards` shards, quiet.
std::vector<std::string> hash_server_args(int64_t shards);

// Ids that the purge and stream scenarios fill a hash server with and then move away: from
// 1,000,000,000 up, clear of udp_sim's users (1..users).
struct FilledIds {
  FillReport fill;
  std::string range;  // "FIRST-LAST", for imctl assign
};
// Fills `records` such ids into the hash server at `target` (its pid `pid`) with hash_bench, and
// says each fill level's line into `result`.
FilledIds fill_ids_above_users(const std::string& hash_bench, const std::string& target, pid_t pid,
                               int64_t records, Result& result);

// hash_bench --target TARGET ARGS (a rate run: -c, -P, --duration, --keys, --pid...).
HashBenchRates hash_bench_rates(const std::string& hash_bench, const std::string& target,
                                std::vector<std::string> args, double seconds);
// hash_bench --target TARGET --pid PID ARGS (a fill: --fill N or --fill-levels, --ipv6...).
FillReport hash_bench_fill(const std::string& hash_bench, const std::string& target, pid_t pid,
                           std::vector<std::string> args);

}  // namespace imhash::bench
