// udp_sim: the UDP client simulator imhash is load-tested with (docs/design.md §7). Options glue
// only: the work is in LoadDriver (sockets, pacing, retries), UserModel (users, verification) and
// report.h (output, the JSON fields and the exit status).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include "common/runtime/key_file.h"
#include "common/runtime/options.h"
#include "tools/udp_sim/history_log.h"
#include "tools/udp_sim/load_driver.h"
#include "tools/udp_sim/report.h"
#include "tools/udp_sim/sim_config.h"
#include "tools/udp_sim/udp_sockets.h"
#include "tools/udp_sim/user_model.h"

namespace po = boost::program_options;
using namespace imhash;
using namespace imhash::sim;

namespace {

// SIGINT/SIGTERM received: the first ends the load, a second also the wait for late replies.
std::atomic<int> g_signals{0};
static_assert(std::atomic<int>::is_always_lock_free);  // so the signal handler may touch it

extern "C" void on_signal(int) { g_signals.fetch_add(1); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: ppoll returns EINTR and the loop sees the flag at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

constexpr const char* kSummary =
    "UDP client simulator: many users logging in, heartbeating, looking each other up and logging\n"
    "out against a login server, open loop (--rate) or closed loop (--window, the default).\n"
    "Each user first sends LOGIN, then the --mix runs until --duration is over (or, with --storm,\n"
    "each user is looked up once after every LOGIN has ended). A progress line\n"
    "every second, then a summary (--json: one JSON object on stdout, progress on stderr; fields\n"
    "listed in tools/udp_sim/report.h: requests, replies, retries_sent, no_reply, abandoned,\n"
    "status{...}, ops{LOGIN,HEARTBEAT,LOOKUP,LOGOUT: {requests, replies, status, latency_us}},\n"
    "latency_us{p50,p99,p999,...}, late/mismatched/malformed/amplified_replies,\n"
    "verify{result, verified_ok, verify_failed, unjudged, failures[]}, exit_code).\n"
    "Exit status: 0 ok; 1 --verify found a wrong answer or the server sent amplified, mismatched\n"
    "or malformed replies; 2 --verify could not judge a single LOOKUP; 69 no reply at all;\n"
    "64 bad command line (an unwritable --csv or --history file too); 70 writing the --history\n"
    "file failed.";

SimConfig read_config(const Options& opts) {
  SimConfig c;
  c.target = opts.get<std::string>("target");
  const HostPort hp = parse_host_port(c.target, "--target");
  if (hp.port == 0) throw UsageError("--target: port 0 is not a server's port");
  c.host = hp.host;
  c.port = hp.port;

  c.users = opts.get<uint64_t>("users");
  if (c.users == 0 || c.users > UINT32_MAX) {
    throw UsageError("--users must be between 1 and " + std::to_string(UINT32_MAX));
  }
  c.first_user = opts.get<uint64_t>("first-user");
  if (c.first_user > UINT64_MAX - (c.users - 1)) {
    throw UsageError("--first-user + --users runs past the largest user id");
  }
  c.duration_s = opts.get<double>("duration");
  if (!(c.duration_s > 0 && c.duration_s <= 1e6)) {
    throw UsageError("--duration must be between 0 and 1000000 seconds");
  }
  c.warmup_s = opts.get<double>("warmup");
  if (!(c.warmup_s >= 0 && c.warmup_s <= 1e6)) {
    throw UsageError("--warmup must be between 0 and 1000000 seconds");
  }
  if (opts.has("rate") && opts.has("window")) {
    throw UsageError("--rate (open loop) and --window (closed loop) exclude each other");
  }
  if (opts.has("rate")) {
    c.rate = opts.get<double>("rate");
    if (!(c.rate > 0 && c.rate <= 1e8)) throw UsageError("--rate must be between 0 and 1e8");
  }
  c.window = opts.get<uint32_t>("window");
  if (c.window == 0 || c.window > InFlightTable::kMaxCapacity) {
    throw UsageError("--window must be between 1 and " +
                     std::to_string(InFlightTable::kMaxCapacity));
  }
  std::string error;
  const auto mix = parse_mix(opts.get<std::string>("mix"), error);
  if (!mix) throw UsageError("--mix: " + error);
  c.mix = *mix;
  c.timeout_ms = opts.get<uint32_t>("timeout-ms");
  if (c.timeout_ms == 0 || c.timeout_ms > 60'000) {
    throw UsageError("--timeout-ms must be between 1 and 60000");
  }
  c.retries = opts.get<uint32_t>("retries");
  if (c.retries > 100) throw UsageError("--retries must be at most 100");
  c.sockets = opts.get<uint32_t>("sockets");
  if (c.sockets == 0 || c.sockets > 1024) throw UsageError("--sockets must be between 1 and 1024");
  c.ipv6_percent = opts.get<uint32_t>("ipv6-percent");
  if (c.ipv6_percent > 100) throw UsageError("--ipv6-percent must be at most 100");
  c.seed =
      opts.has("seed")
          ? opts.get<uint64_t>("seed")
          : std::random_device{}() ^
                static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  c.observed = opts.get<bool>("observed");
  c.verify = opts.get<bool>("verify");
  c.echo = opts.get<bool>("echo");
  if (c.echo && c.verify) throw UsageError("--echo and --verify exclude each other");
  c.storm = opts.get<bool>("storm");
  if (c.storm && (c.open_loop() || c.echo)) {
    throw UsageError(
        "--storm runs closed loop (--window) against a login server: not with --rate "
        "or --echo");
  }
  if (c.storm && c.warmup_s > 0) throw UsageError("--storm and --warmup exclude each other");
  c.lookup_only = opts.get<bool>("lookup-only");
  if (c.lookup_only && !c.storm) throw UsageError("--lookup-only needs --storm");
  if (c.lookup_only && c.observed) {
    throw UsageError(
        "--lookup-only and --observed exclude each other (a new run's sockets have "
        "other addresses)");
  }
  c.busy_wait = opts.get<bool>("busy-wait");
  c.json = opts.get<bool>("json");
  if (opts.has("csv")) {
    c.csv = opts.get<std::string>("csv");
    if (c.csv.empty()) throw UsageError("--csv needs a file name");
  }
  if (opts.has("history")) {
    c.history = opts.get<std::string>("history");
    if (c.history.empty()) throw UsageError("--history needs a file name");
    if (c.observed || c.echo) {
      throw UsageError(
          "--history excludes --observed (the server would store the socket's address, not an "
          "endpoint unique to each write) and --echo");
    }
  }
  if (opts.has("history-client")) {
    if (c.history.empty()) throw UsageError("--history-client needs --history");
    const uint32_t k = opts.get<uint32_t>("history-client");
    if (k > UINT16_MAX) throw UsageError("--history-client must be between 0 and 65535");
    c.history_client = static_cast<uint16_t>(k);
  }
  if (opts.has("auth-key-file")) c.auth_key = load_key_file(opts.get<std::string>("auth-key-file"));
  return c;
}

int sim_main(int argc, char** argv) {
  Options opts("udp_sim", kSummary);
  opts.add()("target", po::value<std::string>()->required(), "login server HOST:PORT (UDP)")(
      "users", po::value<uint64_t>()->required(), "simulated users")(
      "duration", po::value<double>()->default_value(10),
      "seconds of load (the run always ends by itself)")(
      "warmup", po::value<double>()->default_value(0),
      "seconds of load before --duration, left out of every figure (users log in, caches and "
      "the machine warm up; --verify still tracks it)")(
      "rate", po::value<double>(), "open loop: requests per second on a fixed schedule")(
      "window", po::value<uint32_t>()->default_value(64),
      "closed loop (the default): requests kept in flight")(
      "mix", po::value<std::string>()->default_value("heartbeat=50,lookup=45,logout=5"),
      "weights of the steady-state operations: login, heartbeat, lookup, logout")(
      "timeout-ms", po::value<uint32_t>()->default_value(200), "milliseconds per try")(
      "retries", po::value<uint32_t>()->default_value(3),
      "re-sends of a timed-out request (same request_id)")(
      "sockets", po::value<uint32_t>()->default_value(8),
      "UDP source sockets (a SO_REUSEPORT server spreads them over its threads)")(
      "seed", po::value<uint64_t>(), "random seed (default: a new one, printed in the summary)")(
      "first-user", po::value<uint64_t>()->default_value(1),
      "first user id (several simulators side by side take disjoint ranges)")(
      "ipv6-percent", po::value<uint32_t>()->default_value(10),
      "share of users registering an IPv6 endpoint (2001:db8::ID; others 10.x.y.z)")(
      "observed", po::bool_switch(),
      "send no ENDPOINT: the server stores the source address; --verify expects the socket's "
      "own address (so no NAT in between)")(
      "verify", po::bool_switch(),
      "check every answer against the users' known state; exit 1 on a wrong one")(
      "echo", po::bool_switch(),
      "the target is a bare UDP echo server (e.g. ../shared/bench/udp_limit.c): each request's "
      "own bytes are its OK answer; measures the machine's UDP path with the same pacing")(
      "storm", po::bool_switch(),
      "a login storm instead of the --mix: every user logs in once (timed-out tries re-sent), "
      "then, once every LOGIN has ended, every user is looked up once; the run ends when the last "
      "LOOKUP ends (--duration bounds it). With --verify, a LOOKUP of a user whose LOGIN was "
      "answered OK must find its endpoint (verify_failed: users lost)")(
      "lookup-only", po::bool_switch(),
      "with --storm: send no LOGIN; every user counts as logged in by an earlier --storm run with "
      "the same --first-user and --ipv6-percent (with --history: and --history-client), and is "
      "looked up once (with --verify: each must be found with its endpoint; verify_failed counts "
      "the users lost since)")(
      "busy-wait", po::bool_switch(),
      "poll for replies and due times instead of sleeping: finer pacing and timing (a sleep "
      "wakes late, and open loop charges that to the server), at the cost of a whole core; give "
      "it one the servers do not need")("json", po::bool_switch(),
                                        "final summary as one JSON object on stdout")(
      "csv", po::value<std::string>(),
      "write a time series to FILE: a header, then one row per second (elapsed_s, sent_per_s, "
      "done_per_s, p50_us, p99_us, p999_us, in_flight, requests ended by each error status, "
      "no_reply, verify_failed); scripts/plot.sh draws it")(
      "auth-key-file", po::value<std::string>(),
      "the login servers' key file (hex): every LOGIN, HEARTBEAT and LOGOUT carries a valid "
      "token for its user (expiry an hour ahead)")(
      "history", po::value<std::string>(),
      "write every request to FILE for a checker, one line each: `INVOKE_NS COMPLETE_NS OP USER "
      "STATUS ENDPOINT` (CLOCK_MONOTONIC ns of the first send and of the reply or giving up; "
      "STATUS `none` when no reply came; ENDPOINT the one written, or read by a LOOKUP, `-` for "
      "none), after a `# imhash-history 1` line and a comment with the settings "
      "(tools/udp_sim/history_log.h). Every LOGIN and HEARTBEAT then carries an endpoint of its "
      "own, [2001:db8:CLIENT:WRITE:USER]:5222, so a stale LOOKUP shows (not with --observed)")(
      "history-client", po::value<uint32_t>(),
      "with --history: this process's number 0..65535 (default 0) in the endpoints it writes; "
      "give each udp_sim writing the same users its own");
  if (auto code = opts.parse(argc, argv)) return *code;
  const SimConfig config = read_config(opts);

  const UdpSockets sockets(config.host, config.port, config.sockets);
  UserModel model(UserModel::Config{
      .first_user = config.first_user,
      .users = static_cast<uint32_t>(config.users),
      .mix = config.mix,
      .ipv6_percent = config.ipv6_percent,
      .sockets = config.sockets,
      .observed = config.observed ? sockets.locals() : std::vector<Endpoint>{},
      .verify = config.verify,
      .history_client =
          config.history.empty() ? std::nullopt : std::optional<uint16_t>(config.history_client),
      .seed = config.seed,
      .storm = config.storm,
      .lookup_only = config.lookup_only,
  });
  spdlog::info(
      "{} users against {}{}, {} for {} s{}{}, seed {}", config.users, sockets.target().to_string(),
      config.echo ? " (echo)" : "",
      config.open_loop() ? "rate " + std::to_string(config.rate) + "/s"
                         : "window " + std::to_string(config.window),
      config.duration_s,
      config.warmup_s > 0
          ? fmt::format(" after a {} s warm-up (no progress lines during it)", config.warmup_s)
          : std::string(),
      config.busy_wait ? ", busy-waiting" : "", config.seed);

  install_signal_handlers();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(nullptr, &std::fclose);
  if (!config.csv.empty()) {
    csv.reset(std::fopen(config.csv.c_str(), "w"));
    if (!csv) throw UsageError("--csv: cannot write " + config.csv + ": " + std::strerror(errno));
  }
  // Opened before any load is sent, so that a bad path costs nothing.
  std::ofstream history_file;
  std::unique_ptr<HistoryLog> history;
  if (!config.history.empty()) {
    history_file.open(config.history, std::ios::out | std::ios::trunc | std::ios::binary);
    if (!history_file) {
      throw UsageError("--history: cannot write " + config.history + ": " + std::strerror(errno));
    }
    history = std::make_unique<HistoryLog>(history_file, history_comment(config));
  }
  Reporter reporter(config.verify, config.json ? stderr : stdout, csv.get());
  LoadDriver driver(config, sockets, model, reporter, history.get());
  driver.run(g_signals);
  const bool history_written = !history || history->finish();

  const RunSummary summary{.config = config,
                           .target = sockets.target().to_string(),
                           .counters = driver.counters(),
                           .latencies = driver.latencies(),
                           .verify = model.verify_counts(),
                           .failures = model.failures(),
                           .elapsed_s = driver.elapsed_s(),
                           .interrupted = driver.interrupted(),
                           .history_records = history ? history->records() : 0};
  if (config.json) {
    std::printf("%s\n", boost::json::serialize(summary_json(summary)).c_str());
  } else {
    std::fputs(summary_text(summary).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!history_written) {  // an incomplete history would pass for the whole run with its checker
    spdlog::error("--history: writing {} failed (disk full?): the history is incomplete",
                  config.history);
    return kExitSoftware;
  }
  const int code = exit_code_for(config.verify, driver.counters(), model.verify_counts());
  if (code == kExitUnavailable) {
    spdlog::error("no reply from {} to {} requests ({} ICMP port-unreachable)", summary.target,
                  driver.counters().requests(), driver.counters().refused);
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) { return run_main("udp_sim", sim_main, argc, argv); }
