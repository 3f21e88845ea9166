// Scenario storm (bench.sh's bench_storm and storm_once): 12M distinct users log in through one
// login server (1 thread, no rate limit) into one hash server (1, then 2 shards), then each is
// looked up (udp_sim --storm --verify, closed loop, window 64, one socket): LOGINs answered OK or
// otherwise, users found and lost, each shard's longest event-loop turn and the turns by duration
// (the hash server's /metrics after the storm), the LOGINs' p99 / p999. With --base, the same
// storm into that build's cluster after this one's, for each shard count. The cluster is
// e2e_cluster.h's (a config server beside, as everywhere in the driver; bench.sh used a table
// file). A turn that the host takes the core away from lasts as long as that: the storm's
// processes share the cores, so the longest turn is at least the host's longest hiccup.
//
// Figures: storms: [{shards, side, users, login: {requests, ok, other_statuses: {...},
// no_reply, retries, p50_us, p99_us, p999_us, max_us}, lookup: {requests, found, lost,
// unjudged, other_statuses}, elapsed_s, requests_per_s, longest_turn_ms: {SHARD: ms},
// turns_by_duration: [{le_s, turns}]}].
#include <chrono>
#include <map>
#include <sstream>

#include "harness/http_get.h"
#include "harness/wait_until.h"
#include "tools/bench/bench.h"
#include "tools/bench/e2e_cluster.h"
#include "tools/bench/sim.h"

namespace imhash::bench {
namespace {

uint64_t field(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<uint64_t>() : 0;
}

// The statuses other than OK that ended some requests, {STATUS: count}.
boost::json::object others(const std::map<std::string, uint64_t>& status) {
  boost::json::object out;
  for (const auto& [name, count] : status) {
    if (name != "OK" && count > 0) out[name] = count;
  }
  return out;
}

std::string others_text(const boost::json::object& o) {
  std::string out;
  for (const auto& [name, count] : o) {
    out += (out.empty() ? "" : ", ") + std::string(name) + " " +
           std::to_string(count.to_number<uint64_t>());
  }
  return out.empty() ? "none" : out;
}

// From a /metrics page: imhash_hash_longest_turn_seconds by shard (ms), and the
// imhash_hash_turn_seconds histogram summed over the shards, as turns per bucket (the buckets
// are cumulative; empty ones left out).
void turns(const std::string& page, boost::json::object& longest, boost::json::array& buckets) {
  std::istringstream in(page);
  std::vector<std::string> order;
  std::map<std::string, double> cumulative;
  auto label = [](const std::string& line, const std::string& name) {
    const auto at = line.find(name + "=\"");
    if (at == std::string::npos) return std::string();
    const auto start = at + name.size() + 2;
    return line.substr(start, line.find('"', start) - start);
  };
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const double value = std::stod(line.substr(line.rfind(' ') + 1));
    if (line.rfind("imhash_hash_longest_turn_seconds", 0) == 0) {
      longest[label(line, "shard")] = value * 1000;
    } else if (line.rfind("imhash_hash_turn_seconds_bucket", 0) == 0) {
      const std::string le = label(line, "le");
      if (!cumulative.count(le)) order.push_back(le);
      cumulative[le] += value;
    }
  }
  double previous = 0;
  for (const std::string& le : order) {
    const double n = cumulative[le] - previous;
    if (n > 0) buckets.push_back({{"le_s", le}, {"turns", n}});
    previous = cumulative[le];
  }
}

boost::json::object storm_once(Context& ctx, const test::Binaries& binaries,
                               const std::string& side, int64_t shards, int64_t users,
                               double bound_s) {
  ctx.result.say(
      format("== login storm (%s): %ld distinct users, 1 login server (1 thread), 1 "
             "hash server with %ld shard(s)",
             side.c_str(), static_cast<long>(users), static_cast<long>(shards)));
  const InDirectory in(ctx.work_dir + "/storm-" + std::to_string(shards) + "-" + side);
  E2eTopology topology{1, 1, "off", static_cast<int>(shards), true};
  const E2eSecrets secrets(ctx.work_dir, false);
  E2eCluster cluster(binaries, topology, secrets);
  const UdpSimSummary sim =
      run_sim(ctx.self.udp_sim,
              {"--target", cluster.target(), "--users", std::to_string(users), "--storm",
               "--verify", "--duration", std::to_string(bound_s), "--sockets", "1"},
              "storm");
  // The hash server samples its shards' turn counters every 500 ms: the page holds the whole
  // storm once two samples agree (bounded; a short storm ends between two samples).
  const std::string metrics = cluster.cluster().hash_metrics(1);
  std::string page = test::scrape(metrics);
  test::wait_until(
      [&] {
        const std::string next = test::scrape(metrics);
        const double a = test::metric(page, "imhash_hash_turn_seconds_count");
        const double b = test::metric(next, "imhash_hash_turn_seconds_count");
        page = next;
        return a > 0 && a == b;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(600));
  boost::json::object longest;
  boost::json::array buckets;
  turns(page, longest, buckets);

  const test::UdpSimOp& login = sim.op("LOGIN");
  const test::UdpSimOp& lookup = sim.op("LOOKUP");
  boost::json::object o{{"shards", shards}, {"side", side}, {"users", users}};
  o["login"] = {{"requests", login.requests},
                {"ok", login.count("OK")},
                {"other_statuses", others(login.status)},
                {"no_reply", login.no_reply + login.abandoned},
                {"retries", login.retries},
                {"p50_us", login.latency_us.p50},
                {"p99_us", login.latency_us.p99},
                {"p999_us", login.latency_us.p999},
                {"max_us", login.latency_us.max}};
  o["lookup"] = {{"requests", lookup.requests},
                 {"found", sim.verify.verified_ok},
                 {"lost", sim.verify.verify_failed},
                 {"unjudged", sim.verify.unjudged},
                 {"other_statuses", others(lookup.status)}};
  o["elapsed_s"] = sim.elapsed_s;
  o["requests_per_s"] = sim.requests_per_s;
  o["longest_turn_ms"] = longest;
  o["turns_by_duration"] = buckets;

  const auto& l = o["login"].as_object();
  const auto& k = o["lookup"].as_object();
  ctx.result.say(format(
      "LOGIN:  sent %lu  answered OK %lu  other statuses: %s  no reply %lu  "
      "(re-sent tries %lu)",
      field(l, "requests"), field(l, "ok"), others_text(l.at("other_statuses").as_object()).c_str(),
      field(l, "no_reply"), field(l, "retries")));
  ctx.result.say(format("        p50 %lu us  p99 %lu us  p999 %lu us  max %lu us",
                        field(l, "p50_us"), field(l, "p99_us"), field(l, "p999_us"),
                        field(l, "max_us")));
  ctx.result.say(
      format("LOOKUP: sent %lu  users found %lu  lost %lu  not judged %lu  statuses "
             "other than OK: %s",
             field(k, "requests"), field(k, "found"), field(k, "lost"), field(k, "unjudged"),
             others_text(k.at("other_statuses").as_object()).c_str()));
  ctx.result.say(format("elapsed %.1f s (%.0f requests/s)", sim.elapsed_s, sim.requests_per_s));
  std::string turn_line, bucket_line;
  for (const auto& [shard, ms] : longest) {
    turn_line += format("shard %s %.2f ms  ", std::string(shard).c_str(), ms.to_number<double>());
  }
  for (const auto& b : buckets) {
    bucket_line += format("<= %s s: %.0f  ", b.at("le_s").as_string().c_str(),
                          b.at("turns").to_number<double>());
  }
  ctx.result.say("longest event-loop turn during the storm: " +
                 (turn_line.empty() ? "n/a (this build has no such metric)" : turn_line));
  ctx.result.say("turns by duration: " + (bucket_line.empty() ? "n/a" : bucket_line));
  return o;
}

void run_storm(Context& ctx) {
  Settings& s = ctx.settings;
  const int64_t users = s.integer("users", 12000000, "distinct users logging in");
  const auto shard_counts = s.integers("shards", "1,2", "the hash server's shards, in turn");
  const double bound = s.real("bound_s", 900, "udp_sim's --duration: the storm's bound");
  for (int64_t n : shard_counts) {
    if (n < 1 || n > 64) throw std::invalid_argument("shards: 1 to 64");
  }
  if (s.describing) return;
  boost::json::array storms;
  for (int64_t shards : shard_counts) {
    storms.push_back(storm_once(ctx, ctx.self, "self", shards, users, bound));
    if (ctx.base) storms.push_back(storm_once(ctx, *ctx.base, "base", shards, users, bound));
  }
  ctx.result.figures["storms"] = std::move(storms);
}

}  // namespace

IMHASH_BENCH_SCENARIO("storm",
                      "12M distinct users log in through one login server into one hash server "
                      "(1, 2 shards), then each is looked up",
                      run_storm);

}  // namespace imhash::bench
