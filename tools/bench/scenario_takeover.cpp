// Scenario takeover (bench.sh's bench_takeover and its takeover_* functions): the control plane's
// takeover (docs/design.md §5, "Several config servers: the state in etcd"). A 3-member etcd on
// loopback (harness/etcd_cluster.h, /usr/bin/etcd), three config servers cfg0..cfg2 on it (lease
// TTL `ttl_s`, heartbeat 1000 ms, range mode), two hash servers (1 shard each) and one login
// server given all three (harness/config_cluster.h), and a verified open-loop load (udp_sim
// --users 20000 --rate 20000 --verify --timeout-ms 1000) through the whole run. Each round finds
// the leader, starts an `imctl assign` of a tenth of the load's users (a fresh block a round) to
// the hash server that does not own them, and kills the leader with kill -9 `kill_delays_ms` after
// imctl started (one delay a round, in turn), in the middle of the change; one last round stops
// it with SIGTERM instead (its lease is revoked). From the kill: until a survivor answers GET
// /v1/status as the leader (takeover), and until it shows every node up at its latest version
// (nodes back), polled every 50 ms (takeover_probes.h); whether the change was acknowledged and
// whether it is in the history; then the killed one is started again on its addresses and must
// show as a standby. At the end: the history's versions (each once, none missing) and the load's
// summary (the lines and figures: takeover_report.h). etcd's data directories go with the run;
// the logs stay in the work directory (cfgI.log, etcd.mI.log, roundN/assign.err, ...). Main
// thread only.
//
// Figures: lease_ttl_s; rounds: [{round, signal ("KILL"|"TERM"), killed (cfgN), kill_delay_ms
// (from imctl's start to the signal, as it happened), change, version_before, takeover_ms,
// new_leader, nodes_back_ms (null: not within 60 s), acknowledged, acknowledged_version (null),
// in_history_versions: [...], standby_again_ms (after the restart; null: not within 30 s),
// answer}]; takeover_kill_ms: {min, median, max, rounds}; takeover_kill_max_over_2ttl;
// slow_kill_rounds (above TTL x 1.25 + 250 ms); takeover_term_ms: [...];
// takeover_term_max_over_2ttl; nodes_back_ms: {min, median, max}; changes: {in_flight,
// acknowledged, lost, not_acknowledged_made, made_twice}; versions: {entries, highest,
// status_version, each_once, twice: [...], missing: [...]}; load: sim.h's sim_figures plus
// status: {STATUS: n}, lookups_sent, lookups_failed, lookup_other_statuses: {...},
// lookup_no_reply, lookup_abandoned, lookup_retries, lookup_max_us, requests_failed,
// requests_failed_by_op: {OP: n}, verify: {result, verify_failed, verified_ok, unjudged}.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/etcd_cluster.h"
#include "harness/http_get.h"
#include "harness/wait_until.h"
#include "tools/bench/bench.h"
#include "tools/bench/sim.h"
#include "tools/bench/takeover_probes.h"
#include "tools/bench/takeover_report.h"

// In a namespace of its own (with takeover_probes.h and takeover_report.h): the driver is a unity
// build, and this file's helpers must not meet another scenario's of the same name in one
// translation unit.
namespace imhash::bench::takeover {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kConfigServers = 3;
constexpr int kHashServers = 2;

struct TakeoverSettings {
  int64_t rounds, ttl_s, users, load_s;
  double rate;
  std::vector<int64_t> delays;
};

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::vector<std::string> admins(const test::ConfigCluster& c) {
  std::vector<std::string> out;
  for (int i = 0; i < kConfigServers; ++i) out.push_back(c.admin_address(i));
  return out;
}

// A table change through whichever config server leads, tried again (20 s at most) while none
// does or a new leader still refuses changes ("has just taken over and waits").
void change(test::ConfigCluster& c, std::vector<std::string> args) {
  test::ImctlResult r;
  if (!test::wait_until([&] { return (r = c.imctl(args)).exit_code == 0; }, seconds(20),
                        milliseconds(200))) {
    throw std::runtime_error("imctl failed for 20 s (imctl.log): " + r.out.substr(0, 400));
  }
}

// The LOGINs, OKs and all, the login server has answered (its /metrics).
double login_replies(test::ConfigCluster& c) {
  return test::metric(test::scrape(c.login_metrics(1)), "imhash_login_replies_total");
}

// The versions in `history` whose change is `change`, after version `after`, in order.
std::vector<uint64_t> made_in(const json::value& history, const std::string& change,
                              uint64_t after) {
  std::vector<uint64_t> got;
  for (const json::value& e : history.at("versions").as_array()) {
    const json::object& o = e.as_object();
    const uint64_t v = o.at("version").to_number<uint64_t>();
    if (o.at("change").as_string() == change && v > after) got.push_back(v);
  }
  std::sort(got.begin(), got.end());
  return got;
}

void save(const std::string& path, const json::value& v) {
  std::ofstream(path) << json::serialize(v) << "\n";
}

// What imctl said when it did not get the change through: its sentence lists what each address
// answered, the leader's (the first) is the news.
std::string why_not(const std::string& err_file, int exit_code) {
  std::ifstream in(err_file);
  std::string first;
  std::getline(in, first);
  static const std::regex sentence(
      "^imctl: no config server served the request: [0-9.]*:[0-9]*: ([^;]*);.*");
  std::smatch m;
  const std::string why =
      std::regex_match(first, m, sentence) ? "the leader: " + m[1].str() : first.substr(0, 160);
  return "not acknowledged (imctl exit " + std::to_string(exit_code) + ": " + why + ")";
}

Round takeover_round(Context& ctx, test::ConfigCluster& c, const TakeoverSettings& t, int r,
                     bool term, int64_t delay) {
  Round out;
  out.number = r;
  out.term = term;
  const auto lead = await_leader(admins(c), -1, true, seconds(30));
  if (!lead) throw std::runtime_error(format("round %d: no leader taking changes within 30 s", r));
  const int li = out.killed = lead->value;
  // A tenth of the load's users, a fresh block each round, to the hash server that does not own
  // the first of them.
  const int64_t block = t.users / 10;
  const int64_t lo = ((r - 1) % 10) * block + 1, hi = ((r - 1) % 10 + 1) * block;
  const json::value where = c.imctl_json({"where", std::to_string(lo)});
  out.before = where.at("version").to_number<uint64_t>();
  const std::string target = where.at("server").as_string() == "hash1" ? "hash2" : "hash1";
  const std::string range = std::to_string(lo) + "-" + std::to_string(hi);
  out.change = "assign " + range + " to " + target;
  const std::string rd = ctx.work_dir + "/round" + std::to_string(r);
  std::filesystem::create_directories(rd);
  // The change goes to the leader first (then, as imctl does, to the others).
  std::string order = c.admin_address(li);
  for (int i = 0; i < kConfigServers; ++i) {
    if (i != li) order += "," + c.admin_address(i);
  }
  const auto t_start = Clock::now();
  test::ChildProcess assign(
      ctx.self.imctl, {"--admin", order, "--timeout-ms", "2000", "--json", "assign", range, target},
      {.stderr_log = rd + "/assign.err"});
  // A fault schedule, not a readiness wait: the leader dies `delay` ms into the change, wherever
  // the change has got by then, which is what the round measures.
  std::this_thread::sleep_until(t_start + milliseconds(delay));
  const auto t_kill = Clock::now();
  if (term) {
    ::kill(c.config(li).pid(), SIGTERM);  // reaped below, once the takeover is timed
  } else {
    c.kill_config(li);  // SIGKILL, reaped
  }
  out.delay_ms = ms_between(t_start, t_kill);

  const auto next = await_leader(admins(c), li, false, seconds(30));
  if (!next) {
    throw std::runtime_error(
        format("round %d: no config server led within 30 s of the kill of cfg%d", r, li));
  }
  out.next = next->value;
  out.takeover_ms = ms_between(t_kill, next->at);
  if (const auto back = await_nodes_back(c.admin_address(out.next), kHashServers, 1, seconds(60))) {
    out.nodes_ms = ms_between(t_kill, back->at);
  }
  // The change's answer (imctl: 2 s per exchange, each address once), then the old leader gone.
  const std::string answer = assign.read_all(seconds(30));
  const int arc = assign.stop(0);
  if (term) c.config(li).stop(SIGTERM, seconds(5));
  if (arc == 0) out.acked = json::parse(answer).at("version").to_number<uint64_t>();
  const json::value history = c.imctl_json({"history", "--limit", "1000"});
  save(rd + "/history.json", history);
  out.made = made_in(history, out.change, out.before);
  // The old leader back on its addresses, as a standby.
  const auto t_restart = Clock::now();
  c.start_config(li);
  if (const auto at =
          await_standby(c.admin_address(out.next), "cfg" + std::to_string(li), seconds(30))) {
    out.standby_ms = ms_between(t_restart, *at);
  }
  out.answer = arc == 0 ? "acknowledged (version " + std::to_string(*out.acked) + ")"
                        : why_not(rd + "/assign.err", arc);
  say_round(ctx, out);
  return out;
}

void run_takeover(Context& ctx) {
  Settings& s = ctx.settings;
  TakeoverSettings t{};
  t.rounds = s.integer("rounds", 5, "kill -9 rounds (one SIGTERM round follows them)");
  t.ttl_s = s.integer("ttl_s", 3, "the config servers' --lease-ttl-s");
  t.delays = s.integers("kill_delays_ms", "5 15 25 35 45",
                        "ms from the start of the imctl assign to the kill, one a round in turn");
  t.load_s = s.integer("load_s", 0,
                       "udp_sim's --duration bound (0: (rounds + 1) x 60 + 30); it is stopped "
                       "after the last round");
  t.users = s.integer("users", 20000, "the load's users (a tenth of them are assigned a round)");
  t.rate = s.real("rate", 20000, "the load's requests per second (open loop)");
  if (t.rounds < 0) throw std::invalid_argument("rounds: 0 or more");
  if (t.ttl_s < 1) throw std::invalid_argument("ttl_s: 1 or more");
  if (t.delays.empty()) throw std::invalid_argument("kill_delays_ms: at least one");
  for (int64_t d : t.delays) {
    if (d < 0) throw std::invalid_argument("kill_delays_ms: 0 or more each");
  }
  if (t.users < 10) throw std::invalid_argument("users: 10 or more");
  if (!(t.rate > 0)) throw std::invalid_argument("rate: above 0");
  if (t.load_s == 0) t.load_s = (t.rounds + 1) * 60 + 30;
  if (s.describing) return;

  test::EtcdCluster etcd(3);
  test::ConfigClusterOptions o;
  o.binaries = ctx.self;
  o.store = "etcd://" + etcd.endpoints() + "/bench";
  o.config_servers = kConfigServers;
  o.lease_ttl_s = static_cast<int>(t.ttl_s);
  // The daemons' defaults (as bench.sh ran them), not the tests' fast heartbeats.
  o.heartbeat_ms = 1000;
  o.grace_ms = 60000;
  o.initial_mode = "range";
  o.metrics = true;  // the login server's replies: when the users' LOGINs are done
  o.state_dir = std::filesystem::absolute("config_state").string();
  for (int i = 1; i <= kHashServers; ++i) o.hash_args[i] = {"--log-level", "warn"};
  test::ConfigCluster c(o);
  c.start_config();
  if (!await_leader(admins(c), -1, false, seconds(30))) {
    throw std::runtime_error("no config server leads 30 s after the start (cfgI.log)");
  }
  std::vector<std::string> add = {"server", "add"};
  for (int i = 1; i <= kHashServers; ++i) {
    c.start_hash(i);
    add.push_back("hash" + std::to_string(i));
  }
  change(c, add);
  c.start_login(1, {"--log-level", "warn"});
  const auto lead = await_leader(admins(c), -1, false, seconds(10));
  if (!lead || !await_nodes_back(c.admin_address(lead->value), kHashServers, 1, seconds(30))) {
    throw std::runtime_error("the nodes did not converge within 30 s");
  }

  ctx.result.say(
      format("== takeover: 3 config servers on a 3-member etcd (loopback), lease TTL %ld s, "
             "heartbeat 1000 ms;",
             static_cast<long>(t.ttl_s)));
  ctx.result.say(
      format("   2 hash servers (1 shard each) and 1 login server given all three; udp_sim --users "
             "%ld",
             static_cast<long>(t.users)));
  ctx.result.say(
      format("   --rate %.0f --verify --timeout-ms 1000 throughout; %ld rounds of kill -9 and one "
             "of",
             t.rate, static_cast<long>(t.rounds)));
  ctx.result.say(
      "   SIGTERM, each in the middle of an imctl assign; times from the kill (polled "
      "every 50 ms)");
  ctx.result.figures["lease_ttl_s"] = t.ttl_s;
  // The load outlasts every round and is stopped after the last.
  test::UdpSim sim({"--target", c.login_address(1), "--users", std::to_string(t.users), "--rate",
                    std::to_string(t.rate), "--verify", "--timeout-ms", "1000", "--duration",
                    std::to_string(t.load_s)},
                   {.udp_sim = ctx.self.udp_sim, .name = "udp_sim"});
  // udp_sim sends each user's LOGIN first: once the login server has answered as many requests
  // as there are users, the load is in its steady mix (bench.sh slept 3 s for it).
  if (!test::wait_until([&] { return login_replies(c) >= static_cast<double>(t.users); },
                        test::kPatience, milliseconds(100))) {
    throw std::runtime_error("the load's LOGINs were not answered within 30 s (udp_sim.log)");
  }
  std::vector<Round> rows;
  for (int r = 1; r <= t.rounds; ++r) {
    const int64_t delay = t.delays[static_cast<size_t>(r - 1) % t.delays.size()];
    rows.push_back(takeover_round(ctx, c, t, r, false, delay));
  }
  rows.push_back(takeover_round(ctx, c, t, static_cast<int>(t.rounds) + 1, true, t.delays[0]));
  // The load runs on after the last round before it ends (bench.sh slept 2 s): until the login
  // server has answered two seconds' worth more of it.
  const double replies = login_replies(c);
  if (!test::wait_until([&] { return login_replies(c) >= replies + 2 * t.rate; }, test::kPatience,
                        milliseconds(100))) {
    ctx.result.say("   (the load did not go on after the last round: see udp_sim.log)");
  }
  // Its first SIGINT ends the load and waits for late replies (udp_sim bounds that).
  sim.interrupt();
  const UdpSimSummary summary = sim.wait(seconds(60));
  const json::value history = c.imctl_json({"history", "--limit", "1000"});
  const json::value status = c.imctl_json({"status"});
  save(ctx.work_dir + "/history.json", history);
  save(ctx.work_dir + "/status.json", status);

  json::array rounds;
  for (const Round& r : rows) rounds.push_back(round_figures(r));
  ctx.result.figures["rounds"] = std::move(rounds);
  report_rounds(ctx, rows, t.ttl_s);
  report_versions(ctx, history, status);
  report_load(ctx, summary);
  ctx.result.say("   logs: " + ctx.work_dir);
}

}  // namespace

IMHASH_BENCH_SCENARIO("takeover",
                      "three config servers on a 3-member etcd: the leader killed (kill -9, then "
                      "SIGTERM) in the middle of an imctl assign under a verified load",
                      run_takeover);

}  // namespace imhash::bench::takeover
