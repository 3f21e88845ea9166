// login_server: the stateless UDP gateway in front of the hash servers.
#include <spdlog/spdlog.h>

#include <thread>

#include "common/links/node_control.h"
#include "common/routing/table_text.h"
#include "common/runtime/defects.h"
#include "common/runtime/key_file.h"
#include "common/runtime/options.h"
#include "login_server/login_server.h"

namespace {

int login_server_main(int argc, char** argv) {
  using namespace imhash;
  namespace po = boost::program_options;
  Options opts("login_server", "the UDP gateway that routes client requests to the hash servers");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  opts.add()(
      "udp", po::value<std::string>()->default_value("127.0.0.1:0"),
      "HOST:PORT to receive client datagrams on ([::]:PORT for dual stack; port 0: pick one)")(
      "table", po::value<std::string>(), "routing table file (JSON); SIGHUP re-reads it")(
      "threads", po::value<uint32_t>()->default_value(cores), "worker threads (default: cores)")(
      "idle-poll-us", po::value<uint32_t>()->default_value(200),
      "under heavy load (a worker busy at least half of the last millisecond), poll this long "
      "after the last event before sleeping, yielding the core between polls: fewer wake-ups, "
      "more CPU (0: always sleep at once)")(
      "timeout-ms", po::value<uint32_t>()->default_value(100),
      "deadline of a request at a hash server; the client then gets TIMEOUT")(
      "hedge-ms", po::value<uint32_t>(),
      "with replicas: a request its hash server has not answered within this long goes on to "
      "the next replica, whose answer the client gets, still within --timeout-ms "
      "(default: half of --timeout-ms; 0: off)")(
      "trace-failed-requests", po::bool_switch(),
      "log, for each request whose client hears TIMEOUT or UNAVAILABLE, every step it took (each "
      "frame sent for it, what came back, hedges, waits): for tracing faults, not for heavy "
      "load")(
      "max-in-flight", po::value<uint32_t>()->default_value(4096),
      "requests in flight per link (per worker, hash server and shard); beyond: UNAVAILABLE")(
      "down-after", po::value<uint32_t>()->default_value(3),
      "a link is marked down and probed when this many requests in a row timed out and nothing "
      "came back for --dead-after-ms")(
      "dead-after-ms", po::value<uint32_t>()->default_value(1000),
      "silence (no answer at all) after which a link whose requests time out is marked down; a "
      "shard that is only slow keeps its link")(
      "grace-ms", po::value<uint32_t>()->default_value(60000),
      "with --table: after the file changes, how long a lookup that misses at the new owner is "
      "retried at the previous one (pushed tables bring their own)")(
      "name", po::value<std::string>(),
      "this server's name in handshakes and imctl status; default login-HOST-PORT (this host's "
      "name and the bound UDP port), so that two login servers never share one")(
      "auth-key-file", po::value<std::string>(),
      "switch authentication on: LOGIN, HEARTBEAT and LOGOUT need a TOKEN MACed with the key in "
      "FILE (hex, at least 32 digits); without a valid one: UNAUTHORIZED")(
      "rate-limit", po::value<uint32_t>()->default_value(20000),
      "requests per second per source address, per worker thread (0: no limit); beyond: "
      "RATE_LIMITED")("rate-burst", po::value<uint32_t>(),
                      "token bucket size per source address (default: 2 x --rate-limit)")(
      "rate-limit-ipv6-prefix", po::value<uint32_t>()->default_value(64),
      "IPv6 sources share a bucket per prefix of this many bits (1 to 128; one host usually "
      "holds a whole /64)");
  NodeControl::add_options(opts,
                           "config server HOST:PORT: register there and take every table it "
                           "pushes",
                           "HOST:PORT shown for this server in imctl status, e.g. the public "
                           "address clients use (default: the --udp address; port 0: the port "
                           "it listens on)");
  if (auto code = opts.parse(argc, argv)) return *code;

  LoginServerConfig config;
  const auto udp = parse_host_port(opts.get<std::string>("udp"), "--udp");
  config.udp_host = udp.host;
  config.udp_port = udp.port;
  config.threads = opts.get<uint32_t>("threads");
  if (config.threads == 0 || config.threads > 256) throw UsageError("--threads must be 1 to 256");
  const uint32_t idle_poll = opts.get<uint32_t>("idle-poll-us");
  if (idle_poll > 100000) throw UsageError("--idle-poll-us must be 0 to 100000");
  config.worker.idle_poll = std::chrono::microseconds(idle_poll);
  const uint32_t timeout = opts.get<uint32_t>("timeout-ms");
  if (timeout == 0 || timeout > 60000) throw UsageError("--timeout-ms must be 1 to 60000");
  auto& link = config.worker.link;
  link.timeout = std::chrono::milliseconds(timeout);
  link.connect_timeout = std::max(link.timeout, std::chrono::milliseconds(500));
  link.max_in_flight = opts.get<uint32_t>("max-in-flight");
  if (link.max_in_flight == 0 || link.max_in_flight > (1u << 20)) {
    throw UsageError("--max-in-flight must be 1 to 1048576");
  }
  link.down_after_timeouts = std::max(1u, opts.get<uint32_t>("down-after"));
  const uint32_t dead_after = opts.get<uint32_t>("dead-after-ms");
  if (dead_after > 600000) throw UsageError("--dead-after-ms must be 0 to 600000");
  link.dead_after = std::chrono::milliseconds(dead_after);
  link.client_name.clear();  // no --name: LoginServer names itself once its port is bound
  if (opts.has("name")) {
    link.client_name = opts.get<std::string>("name");
    if (!is_valid_server_name(link.client_name)) {
      throw UsageError("--name '" + link.client_name + "' is not a valid name (" +
                       std::string(kServerNameRule) + ")");
    }
  }
  config.worker.tick =
      std::clamp(link.timeout / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(20));
  if (!opts.has("table") && !opts.has("config")) {
    throw UsageError("give --config HOST:PORT (a config server) or --table FILE (or both)");
  }
  config.control = NodeControl::endpoints(opts);
  link.cluster_key = config.control.cluster_key.key;
  link.tls = config.control.tls.context;
  if (opts.has("table")) config.table_file = opts.get<std::string>("table");
  // No --name: login-HOST-PORT, stable across restarts (the saved table is kept under the name);
  // with --udp port 0 the server names itself once the port is bound.
  if (link.client_name.empty() && config.udp_port != 0) {
    link.client_name = default_login_name(config.udp_port);
  }
  config.name = link.client_name;
  config.grace = std::chrono::milliseconds(opts.get<uint32_t>("grace-ms"));
  if (opts.has("auth-key-file")) {
    config.worker.flow.auth_key = load_key_file(opts.get<std::string>("auth-key-file"));
    spdlog::info("authentication on: LOGIN, HEARTBEAT and LOGOUT need a token");
  }
  auto& limit = config.worker.flow.rate_limit;
  limit.rate = opts.get<uint32_t>("rate-limit");
  if (opts.has("rate-burst")) {
    limit.burst = opts.get<uint32_t>("rate-burst");
    if (limit.burst == 0) throw UsageError("--rate-burst must be at least 1");
  } else {
    limit.burst = static_cast<uint32_t>(std::min<uint64_t>(2ull * limit.rate, UINT32_MAX));
  }
  if (limit.rate != 0 && limit.burst == 0) limit.burst = 1;
  const uint32_t prefix = opts.get<uint32_t>("rate-limit-ipv6-prefix");
  if (prefix == 0 || prefix > 128) throw UsageError("--rate-limit-ipv6-prefix must be 1 to 128");
  limit.ipv6_prefix = static_cast<uint8_t>(prefix);
  config.worker.flow.park_ns = std::chrono::nanoseconds(link.timeout).count();
  const uint32_t hedge = opts.has("hedge-ms") ? opts.get<uint32_t>("hedge-ms") : timeout / 2;
  if (hedge >= timeout) throw UsageError("--hedge-ms must be below --timeout-ms (0: off)");
  config.worker.flow.hedge_ns = std::chrono::nanoseconds(std::chrono::milliseconds(hedge)).count();
  config.worker.flow.max_parked = link.max_in_flight;
  config.worker.flow.trace_failed = opts.get<bool>("trace-failed-requests");
  if (const Defects d = defects_from_environment(); d.no_hints) {
    config.worker.flow.hold_writes = false;
    spdlog::warn(
        "IMHASH_DEFECTS={}: writes for members out of reach are dropped, not held (a "
        "defect put back for the history checker's tests; never in production)",
        to_string(d));
  }
  LoginServer server(std::move(config));
  server.run();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return imhash::run_main("login_server", login_server_main, argc, argv);
}
