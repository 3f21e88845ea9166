// Scenario replicas (bench.sh's bench_replicas, replicas_kill and replicas_refill; issue 14,
// docs/design.md §3 "Replicas"): what a hash server's death costs when every record has two
// copies, and how fast a server back empty is refilled.
//   kill:   three hash servers (2 shards each) with replicas 2 and one login server (1 thread)
//           under a verified open-loop load (300k users, 50k requests/s, 20 s); 5 s into the
//           load hash2 is killed with SIGKILL, 5 s later it restarts empty on its address and is
//           refilled while the load goes on: lookups sent and failed, verify_failed, the longest
//           wait for an answer and the p99, the login server's hint counters, the refill's
//           duration.
//   refill: `refill_records` distinct users stored by a login storm (udp_sim --storm --verify) in
//           `refill_servers` hash servers with replicas 2; once hash2 holds its share it is
//           killed with SIGKILL and restarted empty: the records it holds after its refill, the
//           refill's seconds, records/s.
// The cluster is the harness's ConfigCluster (heartbeat 250 ms, grace 10 s, ring mode, /metrics
// on every daemon) and its restart of a hash server on the address it had
// (ConfigCluster::start_hash, as tests/integration/replicas_test.cpp restarts one). A refill is
// timed as bench.sh timed it, from the config server's log: from its line "hash2 started empty:
// refilling it at version V" to "hash2 refilled: ...", both stamped to the millisecond, with the
// records its peers' streams at version V or later reported sent in between.
//
// Figures: kill (with the part): {users, rate_per_s, duration_s, killed_at_s, restarted_at_s
// (measured from the load's start), lookups: {requests, failed, other_statuses: {STATUS: n},
// no_reply, abandoned, retries}, tries_per_request, verify: {result, verify_failed, verified_ok,
// unjudged, failures: [first 5, as udp_sim lists them]}, all: {requests, failed, failed_by_op:
// {OP: {STATUS: n, no_reply, abandoned}}, retries_sent}, max_us, lookup_max_us, p50_us, p99_us,
// p999_us, lookup_p99_us, login_metrics: {hints_queued, hints_replayed, hints_dropped,
// replica_reads, replica_write_failures}, refill: REFILL, records_held_at_end, series: udp_sim's
// per-second --csv}.
// refill (with the part): {records, servers, stream_rate_per_s (null: the hash servers' default),
// share, fill: {login_ok, login_requests, users_found, lost, elapsed_s}, held_before_kill,
// held_after_refill, refill: REFILL, records_per_s (held_after_refill / refill_s; not with an
// error)}. REFILL: {refill_s, records_streamed} from the config server's log, or {error} where the
// log shows no complete refill; and refills_empty_after_restart_s (imctl status; null: not within
// 600 s). Main thread only.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <regex>
#include <stdexcept>
#include <thread>

#include "harness/config_cluster.h"
#include "harness/run_logs.h"
#include "harness/wait_until.h"
#include "tools/bench/background_sim.h"
#include "tools/bench/bench.h"
#include "tools/bench/config_log.h"
#include "tools/bench/metrics_scrape.h"
#include "tools/bench/sim.h"

namespace imhash::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

struct ReplicasSettings {
  std::vector<std::string> parts;
  int64_t kill_users, kill_rate;
  double kill_seconds, kill_at_s, restart_at_s;
  int64_t refill_records, refill_servers;
  std::string refill_stream_rate;
  double fill_bound_s;
};

// bench.sh's replicas_cluster: a config server (heartbeat 250 ms, grace 10 s), `servers` hash
// servers hash1.. of 2 shards with `hash_args` in the table with replicas 2, one login server
// (1 thread, no rate limit), /metrics on each; converged on the latest table.
class ReplicasCluster {
 public:
  ReplicasCluster(const test::Binaries& binaries, int servers,
                  const std::vector<std::string>& hash_args) {
    test::ConfigClusterOptions o;
    o.binaries = binaries;
    o.shards = 2;
    o.login_threads = 1;
    o.heartbeat_ms = 250;
    o.grace_ms = 10000;
    o.initial_mode = "ring";  // the config server's default, which bench.sh ran with
    o.metrics = true;
    o.state_dir = std::filesystem::absolute("config_state").string();
    // The config server logs at info: its refill lines are what times a refill.
    for (int i = 1; i <= servers; ++i) {
      o.hash_args[i] = {"--log-level", "warn"};
      o.hash_args[i].insert(o.hash_args[i].end(), hash_args.begin(), hash_args.end());
    }
    cluster_ = std::make_unique<test::ConfigCluster>(o);
    // As tests/integration/replicas_test.cpp serves with two copies. The login server logs at its
    // default level (info: a few lines a run; bench.sh ran it at warn).
    const uint16_t udp = cluster_->start_serving(servers);
    if (const auto r = cluster_->imctl({"replicas", "2"}); r.exit_code != 0) {
      throw std::runtime_error("imctl replicas: " + r.out);
    }
    if (!cluster_->wait_converged(cluster_->version(), servers + 1)) {
      throw std::runtime_error("the cluster did not converge on its table with replicas 2");
    }
    target_ = "127.0.0.1:" + std::to_string(udp);
  }
  test::ConfigCluster& c() { return *cluster_; }
  const std::string& target() const { return target_; }

 private:
  std::unique_ptr<test::ConfigCluster> cluster_;
  std::string target_;
};

// bench.sh's refill_seconds: `name`'s refill in the config server's log after byte `from`.
boost::json::object refill_from_log(const std::string& log, const std::string& name,
                                    std::streamoff from) {
  const std::regex started(" " + name + " started empty: refilling it at version ([0-9]+) ");
  const std::regex done(" hash/[^ ]+: stream done at version ([0-9]+) \\(([0-9]+) records sent\\)");
  std::optional<double> start, end;
  uint64_t version = 0, sent = 0;
  std::string error;
  for (const std::string& line : log_lines_from(log, from)) {
    std::smatch m;
    if (!start) {
      if (std::regex_search(line, m, started)) {
        start = log_stamp_s(line);
        version = std::stoull(m[1]);
      } else if (line.find(" " + name + ": not refilled (") != std::string::npos) {
        error = "not refilled: " + line;
        break;
      }
      continue;
    }
    if (std::regex_search(line, m, done) && std::stoull(m[1]) >= version) sent += std::stoull(m[2]);
    if (line.find(" " + name + " refilled: ") != std::string::npos) {
      end = log_stamp_s(line);
      break;
    }
  }
  if (error.empty() && !start) error = "no refill of " + name + " started (" + log + ")";
  if (error.empty() && !end) error = "the refill of " + name + " did not end (" + log + ")";
  if (!error.empty()) return {{"error", error}};
  // The stamps are to the millisecond: so is their difference (without the double's noise).
  return {{"refill_s", std::round((*end - *start) * 1000) / 1000}, {"records_streamed", sent}};
}

// Waits (bounded) until the log at `log`, after byte `from`, holds a line with one of `needles`.
bool log_shows(const std::string& log, std::streamoff from, const std::vector<std::string>& needles,
               std::chrono::milliseconds bound) {
  return test::wait_until(
      [&] {
        for (const std::string& line : log_lines_from(log, from)) {
          for (const std::string& needle : needles) {
            if (line.find(needle) != std::string::npos) return true;
          }
        }
        return false;
      },
      bound, std::chrono::milliseconds(50));
}

// What restart_and_refill saw.
struct Refill {
  Clock::time_point restarted;   // when the process was started
  bool decided = false;          // the config server logged whether it refills it
  std::optional<double> poll_s;  // refills empty in imctl status, seconds after the restart
  boost::json::object log;       // refill_from_log's figures

  bool ok() const { return !log.contains("error"); }
  double seconds() const { return log.at("refill_s").to_number<double>(); }
  uint64_t streamed() const { return log.at("records_streamed").to_number<uint64_t>(); }
  // REFILL of the header comment.
  boost::json::object figures() const {
    boost::json::object o = log;
    o["refills_empty_after_restart_s"] =
        poll_s ? boost::json::value(*poll_s) : boost::json::value(nullptr);
    return o;
  }
  // bench.sh's lines after the refill's: how long `imctl status` listed it.
  std::string poll_line() const {
    if (!poll_s) return "   refills not empty in imctl status within 600 s of the restart";
    return format(
        "   refills empty in imctl status %.2f s after the restart (the process started; polled "
        "every 0.25 s)",
        *poll_s);
  }
};

// bench.sh's replicas_restart, wait_refills_empty and refill_seconds: starts hash server "hash2"
// again, empty, on its old address (ConfigCluster::start_hash returns once it is registered);
// waits (bounded) for the config server's line that starts its refill (or refuses one); polls
// `imctl status` 4 times a second (600 s at most) until its refills are none; then reads the
// refill from the config server's log (what the log gained since the restart).
Refill restart_and_refill(test::ConfigCluster& c) {
  const std::string log = c.config(0).log_path();
  const std::streamoff from = log_size(log);
  Refill r;
  r.restarted = Clock::now();
  c.start_hash(2);
  r.decided =
      log_shows(log, from, {" hash2 started empty: ", " hash2: not refilled ("}, test::kPatience);
  const bool empty = test::wait_until(
      [&] {
        const boost::json::value status = c.imctl_json({"status"});  // kept: refills points in
        const auto* refills = status.as_object().if_contains("refills");
        return refills && refills->is_array() && refills->as_array().empty();
      },
      std::chrono::seconds(600), std::chrono::milliseconds(250));
  if (empty) r.poll_s = seconds_between(r.restarted, Clock::now());
  // The config server logs how a refill ended before its status drops it: this line is there
  // unless the refill ended otherwise (then refill_from_log says so).
  log_shows(log, from, {" hash2 refilled: ", " hash2: not refilled ("}, std::chrono::seconds(10));
  r.log = refill_from_log(log, "hash2", from);
  return r;
}

uint64_t records_of(const std::string& metrics) {
  return static_cast<uint64_t>(MetricsPage::scrape(metrics).total("imhash_hash_records"));
}

// A hash server's records once its /metrics (sampled every 500 ms) shows the same count twice in
// a row, 600 ms apart (bounded: 10 s; then the latest).
uint64_t settled_records(const std::string& metrics) {
  uint64_t now = records_of(metrics);
  test::wait_until(
      [&] {
        const uint64_t before = now;
        now = records_of(metrics);
        return now == before;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(600));
  return now;
}

// What failed of one op (or of all of them): statuses other than OK and NOT_FOUND, no reply
// after every try, unanswered when the load ended.
struct Failed {
  uint64_t count = 0;
  boost::json::object statuses;  // {STATUS: n}, the bad ones that occurred
  std::string text;              // "TIMEOUT 3, UNAVAILABLE 1" or ""
};

Failed failed_of(const std::map<std::string, uint64_t>& status, uint64_t no_reply,
                 uint64_t abandoned) {
  Failed f;
  for (const auto& [name, n] : status) {
    if (name == "OK" || name == "NOT_FOUND" || n == 0) continue;
    f.statuses[name] = n;
    f.count += n;
    f.text += (f.text.empty() ? "" : ", ") + name + " " + std::to_string(n);
  }
  f.count += no_reply + abandoned;
  return f;
}

// The figures and lines of the kill part's load (bench.sh's inline python).
boost::json::object load_figures(Context& ctx, const UdpSimSummary& d) {
  const test::UdpSimOp& lk = d.op("LOOKUP");
  const Failed lookups = failed_of(lk.status, lk.no_reply, lk.abandoned);
  const uint64_t tries = d.json.at("retries").to_number<uint64_t>() + 1;
  ctx.result.say(format(
      "lookups: sent %lu  failed %lu (statuses other than OK/NOT_FOUND: %s; no reply after %lu "
      "tries %lu; unanswered at the end %lu)  re-sent tries %lu",
      static_cast<unsigned long>(lk.requests), static_cast<unsigned long>(lookups.count),
      lookups.text.empty() ? "none" : lookups.text.c_str(), static_cast<unsigned long>(tries),
      static_cast<unsigned long>(lk.no_reply), static_cast<unsigned long>(lk.abandoned),
      static_cast<unsigned long>(lk.retries)));
  const test::UdpSimVerify& v = d.verify;
  ctx.result.say(format("verify: %s  verify_failed %lu  verified_ok %lu  unjudged %lu",
                        v.result.c_str(), static_cast<unsigned long>(v.verify_failed),
                        static_cast<unsigned long>(v.verified_ok),
                        static_cast<unsigned long>(v.unjudged)));
  boost::json::array failures;
  for (const auto& f : v.failures) {
    if (failures.size() == 5) break;
    const auto& o = f.as_object();
    ctx.result.say(format("   failure: user %s %s: expected %s, got %s",
                          boost::json::serialize(o.at("user")).c_str(),
                          boost::json::serialize(o.at("op")).c_str(),
                          boost::json::serialize(o.at("expected")).c_str(),
                          boost::json::serialize(o.at("got")).c_str()));
    failures.push_back(f);
  }
  boost::json::object by_op;
  std::string by_op_text;
  for (const auto& [name, op] : d.ops) {
    Failed f = failed_of(op.status, op.no_reply, op.abandoned);
    std::string parts = f.text;
    if (op.no_reply) parts += (parts.empty() ? "" : ", ") + format("no reply %lu", op.no_reply);
    if (op.abandoned) parts += (parts.empty() ? "" : ", ") + format("unanswered %lu", op.abandoned);
    if (parts.empty()) continue;
    f.statuses["no_reply"] = op.no_reply;
    f.statuses["abandoned"] = op.abandoned;
    by_op[name] = std::move(f.statuses);
    by_op_text += (by_op_text.empty() ? "" : "; ") + name + ": " + parts;
  }
  const Failed all = failed_of(d.status, d.no_reply, d.abandoned);
  ctx.result.say(format("all requests: sent %lu  failed %lu (%s)  re-sent tries %lu",
                        static_cast<unsigned long>(d.requests),
                        static_cast<unsigned long>(all.count),
                        by_op_text.empty() ? "none" : by_op_text.c_str(),
                        static_cast<unsigned long>(d.retries_sent)));
  const test::UdpSimLatency& lat = d.latency_us;
  const test::UdpSimLatency& llat = lk.latency_us;
  ctx.result.say(format(
      "longest wait for an answer (udp_sim's max latency: answered requests only, from the "
      "scheduled send to the reply's arrival, re-sent tries included): %lu us (lookups %lu us)",
      static_cast<unsigned long>(lat.max), static_cast<unsigned long>(llat.max)));
  ctx.result.say(format("p99 %lu us  p999 %lu us  p50 %lu us  (lookups p99 %lu us)",
                        static_cast<unsigned long>(lat.p99), static_cast<unsigned long>(lat.p999),
                        static_cast<unsigned long>(lat.p50), static_cast<unsigned long>(llat.p99)));
  return {{"lookups",
           {{"requests", lk.requests},
            {"failed", lookups.count},
            {"other_statuses", lookups.statuses},
            {"no_reply", lk.no_reply},
            {"abandoned", lk.abandoned},
            {"retries", lk.retries}}},
          {"tries_per_request", tries},
          {"verify",
           {{"result", v.result},
            {"verify_failed", v.verify_failed},
            {"verified_ok", v.verified_ok},
            {"unjudged", v.unjudged},
            {"failures", std::move(failures)}}},
          {"all",
           {{"requests", d.requests},
            {"failed", all.count},
            {"failed_by_op", std::move(by_op)},
            {"retries_sent", d.retries_sent}}},
          {"max_us", lat.max},
          {"lookup_max_us", llat.max},
          {"p50_us", lat.p50},
          {"p99_us", lat.p99},
          {"p999_us", lat.p999},
          {"lookup_p99_us", llat.p99}};
}

void replicas_kill(Context& ctx, const ReplicasSettings& rs) {
  const InDirectory in(ctx.work_dir + "/kill");
  ReplicasCluster cluster(ctx.self, 3, {});
  test::ConfigCluster& c = cluster.c();
  ctx.result.say(
      "== kill -9 under load: 3 hash servers (2 shards each), replicas 2, 1 login server (1 "
      "thread);");
  ctx.result.say(format(
      "   udp_sim --users %ld --rate %ld (open loop) --duration %g --verify; hash2 killed with "
      "kill -9 at %g s and restarted empty on its address at %g s (at first the load is mostly "
      "the users' LOGINs: %ld at %ld/s)",
      static_cast<long>(rs.kill_users), static_cast<long>(rs.kill_rate), rs.kill_seconds,
      rs.kill_at_s, rs.restart_at_s, static_cast<long>(rs.kill_users),
      static_cast<long>(rs.kill_rate)));
  BackgroundSim sim(
      ctx.self.udp_sim,
      {"--target", cluster.target(), "--users", std::to_string(rs.kill_users), "--duration",
       std::to_string(rs.kill_seconds), "--rate", std::to_string(rs.kill_rate), "--verify"},
      "udp_sim", rs.kill_seconds);
  // The load's start, as an event: its first per-second row, which says how long it has run.
  sim.wait_first_second();
  const double first_row_s =
      sim.series().at("rows").as_array().at(0).as_array().at(0).to_number<double>();
  const Clock::time_point load_start =
      Clock::now() -
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(first_row_s));
  auto at = [&](double s) {
    return load_start +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  // The fault's schedule, not a wait for readiness: the kill and the restart are placed at fixed
  // times into the load, as the scenario defines them.
  std::this_thread::sleep_until(at(rs.kill_at_s));
  c.kill_hash(2);  // SIGKILL, reaped
  const double killed_at = seconds_between(load_start, Clock::now());
  std::this_thread::sleep_until(at(rs.restart_at_s));
  const Refill refill = restart_and_refill(c);
  const double restarted_at = seconds_between(load_start, refill.restarted);
  const UdpSimSummary d = sim.wait();
  const uint64_t held = settled_records(c.hash_metrics(2));

  boost::json::object o{{"users", rs.kill_users},
                        {"rate_per_s", rs.kill_rate},
                        {"duration_s", rs.kill_seconds},
                        {"killed_at_s", killed_at},
                        {"restarted_at_s", restarted_at}};
  for (auto& [key, value] : load_figures(ctx, d)) o[key] = value;
  const MetricsPage page = MetricsPage::scrape(c.login_metrics(1));
  boost::json::object login;
  std::string login_line = "login server /metrics:";
  for (const char* m : {"hints_queued", "hints_replayed", "hints_dropped", "replica_reads",
                        "replica_write_failures"}) {
    const double v = page.total(std::string("imhash_login_") + m + "_total");
    login[m] = v;
    login_line += format("  %s %.0f", m, v);
  }
  ctx.result.say(login_line);
  o["login_metrics"] = std::move(login);
  if (!refill.decided) ctx.result.say("hash2: no refill line in the config server's log");
  ctx.result.say(
      refill.ok()
          ? format("refill of hash2 after its restart: %.3f s (config server log: registration to "
                   "refilled), %lu records streamed to it; it holds %lu at the end of the load",
                   refill.seconds(), static_cast<unsigned long>(refill.streamed()),
                   static_cast<unsigned long>(held))
          : "refill of hash2 after its restart: " +
                std::string(refill.log.at("error").as_string()));
  ctx.result.say(refill.poll_line());
  ctx.result.say(format(
      "per second (udp_sim progress; hash2 down from %.1f s to %.1f s):", killed_at, restarted_at));
  for (const std::string& line : log_lines_from(test::RunLogs::path("udp_sim"), 0)) {
    if (!line.empty() && line[0] == '[') ctx.result.say("   " + line);  // its progress lines
  }
  ctx.result.say("   logs: " + test::RunLogs::dir());
  o["refill"] = refill.figures();
  o["records_held_at_end"] = held;
  o["series"] = sim.series();
  ctx.result.figures["kill"] = std::move(o);
}

void replicas_refill(Context& ctx, const ReplicasSettings& rs) {
  const InDirectory in(ctx.work_dir + "/refill");
  std::vector<std::string> rate_args;
  std::string rate_label = "the default --stream-rate (100000/s per server)";
  if (!rs.refill_stream_rate.empty()) {
    rate_args = {"--stream-rate", rs.refill_stream_rate};
    rate_label = "--stream-rate " + rs.refill_stream_rate;
  }
  const int servers = static_cast<int>(rs.refill_servers);
  ReplicasCluster cluster(ctx.self, servers, rate_args);
  test::ConfigCluster& c = cluster.c();
  const int64_t n = rs.refill_records;
  const uint64_t share = static_cast<uint64_t>(n * 2 / servers);
  ctx.result.say(
      format("== refill of an empty hash server: %ld users in %d hash servers (2 shards each), "
             "replicas 2, %s",
             static_cast<long>(n), servers, rate_label.c_str()));
  const Clock::time_point t0 = Clock::now();
  const UdpSimSummary fill =
      run_sim(ctx.self.udp_sim,
              {"--target", cluster.target(), "--users", std::to_string(n), "--storm", "--verify",
               "--sockets", "1", "--duration", std::to_string(rs.fill_bound_s)},
              "storm");
  const double fill_s = seconds_between(t0, Clock::now());
  const test::UdpSimOp& login = fill.op("LOGIN");
  ctx.result.say(format(
      "fill (udp_sim --storm): %lu LOGINs answered OK of %lu, %lu users found, %lu lost, "
      "in %.1f s",
      static_cast<unsigned long>(login.count("OK")), static_cast<unsigned long>(login.requests),
      static_cast<unsigned long>(fill.verify.verified_ok),
      static_cast<unsigned long>(fill.verify.verify_failed), fill_s));
  // Its share (every record with 2 servers, about 2/3 of them with 3): until it has it, or its
  // count stops moving between two of its /metrics samples (500 ms apart; 60 s at most).
  uint64_t held = records_of(c.hash_metrics(2));
  test::wait_until(
      [&] {
        const uint64_t last = held;
        held = records_of(c.hash_metrics(2));
        return held >= share || held == last;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(600));
  const uint64_t held_before = held;
  ctx.result.say(format("hash2 before the kill: %lu records (its share: %lu)",
                        static_cast<unsigned long>(held_before),
                        static_cast<unsigned long>(share)));
  c.kill_hash(2);  // SIGKILL, reaped
  // bench.sh slept 1 s here; the event it stood for: the config server has seen hash2's link go.
  test::wait_until([&] {
    const boost::json::value status = c.imctl_json({"status"});
    for (const auto& node : status.as_object().at("nodes").as_array()) {
      const auto& o = node.as_object();
      if (o.at("name").as_string() == "hash2") return !o.at("connected").as_bool();
    }
    return true;
  });
  const Refill refill = restart_and_refill(c);
  held = settled_records(c.hash_metrics(2));
  boost::json::object o{
      {"records", n},
      {"servers", servers},
      {"stream_rate_per_s", rs.refill_stream_rate.empty()
                                ? boost::json::value(nullptr)
                                : boost::json::value(std::stoll(rs.refill_stream_rate))},
      {"share", share},
      {"fill",
       {{"login_ok", login.count("OK")},
        {"login_requests", login.requests},
        {"users_found", fill.verify.verified_ok},
        {"lost", fill.verify.verify_failed},
        {"elapsed_s", fill_s}}},
      {"held_before_kill", held_before},
      {"held_after_refill", held},
      {"refill", refill.figures()}};
  if (!refill.decided) ctx.result.say("hash2: no refill line in the config server's log");
  if (refill.ok()) {
    const double per_s = refill.seconds() > 0 ? static_cast<double>(held) / refill.seconds() : 0;
    o["records_per_s"] = per_s;
    ctx.result.say(
        format("refill: hash2 holds %lu records after it (%lu streamed to it) after %.3f s (config "
               "server log: registration to refilled): %.0f records/s",
               static_cast<unsigned long>(held), static_cast<unsigned long>(refill.streamed()),
               refill.seconds(), per_s));
  } else {
    ctx.result.say("refill: " + std::string(refill.log.at("error").as_string()) +
                   format("; hash2 holds %lu records", static_cast<unsigned long>(held)));
  }
  ctx.result.say(refill.poll_line());
  ctx.result.say("   logs: " + test::RunLogs::dir());
  ctx.result.figures["refill"] = std::move(o);
}

void run_replicas(Context& ctx) {
  Settings& s = ctx.settings;
  ReplicasSettings rs;
  rs.parts = s.words("parts", "kill,refill", "which parts: kill (under load), refill (its speed)");
  rs.kill_users = s.integer("kill_users", 300000, "kill: simulated users of the load");
  rs.kill_rate = s.integer("kill_rate", 50000, "kill: offered requests per second (open loop)");
  rs.kill_seconds = s.real("kill_seconds", 20, "kill: the load's duration");
  rs.kill_at_s = s.real("kill_at_s", 5, "kill: seconds into the load when hash2 is killed");
  rs.restart_at_s =
      s.real("restart_at_s", 10, "kill: seconds into the load when hash2 restarts empty");
  rs.refill_records =
      s.integer("refill_records", 5000000, "refill: distinct users stored before the kill");
  rs.refill_servers = s.integer("refill_servers", 2,
                                "refill: hash servers (2: each holds every record; 3: hash2 ~2/3)");
  rs.refill_stream_rate =
      s.text("refill_stream_rate", "", "refill: the hash servers' --stream-rate (\"\": theirs)");
  rs.fill_bound_s = s.real("fill_bound_s", 900, "refill: udp_sim's --duration, the storm's bound");
  for (const std::string& part : rs.parts) {
    if (part != "kill" && part != "refill") {
      throw std::invalid_argument("parts: no part " + part + " (kill, refill)");
    }
  }
  if (!rs.refill_stream_rate.empty() &&
      rs.refill_stream_rate.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument("refill_stream_rate: records per second (0: unthrottled), or \"\"");
  }
  if (rs.refill_servers < 2 || rs.refill_servers > 16) {
    throw std::invalid_argument("refill_servers: 2 to 16 (replicas 2 needs two)");
  }
  if (rs.kill_at_s < 0 || rs.restart_at_s < rs.kill_at_s || rs.restart_at_s >= rs.kill_seconds) {
    throw std::invalid_argument("kill_at_s <= restart_at_s < kill_seconds");
  }
  if (s.describing) return;
  for (const std::string& part : rs.parts) {
    if (part == "kill") replicas_kill(ctx, rs);
    if (part == "refill") replicas_refill(ctx, rs);
  }
}

}  // namespace

IMHASH_BENCH_SCENARIO("replicas",
                      "replicas 2: a hash server killed with kill -9 under a verified load and "
                      "restarted empty; and the refill's speed",
                      run_replicas);

}  // namespace imhash::bench
