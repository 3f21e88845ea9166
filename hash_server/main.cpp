// hash_server: keeps id -> (endpoint, last seen) records in memory, one shard per thread.
#include <spdlog/spdlog.h>

#include <thread>

#include "common/codec/endpoint.h"
#include "common/links/node_control.h"
#include "common/routing/routing_table.h"
#include "common/runtime/defects.h"
#include "common/runtime/options.h"
#include "common/runtime/saved_table.h"
#include "hash_server/hash_server.h"

namespace {

int hash_server_main(int argc, char** argv) {
  using namespace imhash;
  Options opts("hash_server", "the sharded in-memory store of user locations");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  opts.add()("listen", boost::program_options::value<std::string>()->default_value("127.0.0.1:0"),
             "HOST:PORT to accept login server links on (port 0: pick a free port)")(
      "name", boost::program_options::value<std::string>()->default_value("hash1"),
      "this server's name in the routing table")(
      "shards", boost::program_options::value<uint32_t>()->default_value(cores),
      "shard threads (default: the number of cores)")(
      "table", boost::program_options::value<std::string>(),
      "routing table file (JSON), to know which ids this server owns; without one it owns all. "
      "SIGHUP re-reads it")(
      "max-connections", boost::program_options::value<size_t>()->default_value(4096),
      "TCP connections held at most (handshaking or bound; 0: no limit); more are closed at "
      "accept")("max-connections-per-source",
                boost::program_options::value<size_t>()->default_value(1024),
                "TCP connections held at most from one IP address (0: no limit); a login server "
                "opens threads x shards links to each hash server")(
      "idle-timeout", boost::program_options::value<uint32_t>()->default_value(60),
      "seconds a bound link may stay silent before it is closed (login servers ping idle links "
      "every few seconds; 0: never)")(
      "stream-rate", boost::program_options::value<uint64_t>()->default_value(100000),
      "records per second this server streams to their new owners when ids move away from it "
      "(a table change, a drain), over all its shards; 0: as fast as the links go");
  NodeControl::add_options(opts,
                           "config server HOST:PORT: register there, receive tables and purge "
                           "commands; with --table too, the file is the starting table until the "
                           "config server pushes one",
                           "HOST:PORT login servers dial, registered with the config server "
                           "(default: the --listen address; port 0: the port it listens on). "
                           "Required with --config when --listen is 0.0.0.0 or [::]");
  if (auto code = opts.parse(argc, argv)) return *code;

  HashServerConfig config;
  const auto listen = parse_host_port(opts.get<std::string>("listen"), "--listen");
  config.listen_host = listen.host;
  config.listen_port = listen.port;
  config.name = opts.get<std::string>("name");
  config.shards = opts.get<uint32_t>("shards");
  if (config.shards == 0 || config.shards > 1024) {
    throw UsageError("--shards must be between 1 and 1024");
  }
  if (!is_valid_server_name(config.name)) {
    throw UsageError("--name '" + config.name +
                     "': a server name is 1 to 64 characters of A-Z a-z 0-9 . _ -");
  }
  config.control = NodeControl::endpoints(opts);
  config.connection_limits.total = opts.get<size_t>("max-connections");
  config.connection_limits.per_source = opts.get<size_t>("max-connections-per-source");
  config.idle_timeout = std::chrono::seconds(opts.get<uint32_t>("idle-timeout"));
  config.stream_rate = opts.get<uint64_t>("stream-rate");
  if (const Defects d = defects_from_environment(); d.no_tombstones) {
    config.remember_deletes = false;
    spdlog::warn(
        "IMHASH_DEFECTS={}: deletes during moves are not remembered (a defect put back "
        "for the history checker's tests; never in production)",
        to_string(d));
  }
  if (config.control.advertise_host.empty() && config.control.has_config_server() &&
      is_unspecified_host(listen.host)) {
    throw UsageError("--listen " + opts.get<std::string>("listen") +
                     " binds every address but is none to dial: give --advertise HOST:PORT, "
                     "the address login servers reach this server at");
  }
  config.control.cluster_key.check_listener(listen.host, "--listen");
  std::optional<Table> start;
  if (opts.has("table")) {
    config.table_file = opts.get<std::string>("table");
    auto loaded = load_table_file(config.table_file);
    if (!loaded.table) throw ConfigError(loaded.error);
    if (const auto why = table_mismatch(*loaded.table, config.name, config.shards)) {
      throw ConfigError(*why);
    }
    start = std::move(loaded.table);
  }
  if (!config.control.state_dir.empty()) {
    config.saved = std::make_shared<SavedTable>(config.control.state_dir, "hash", config.name);
    std::optional<Table> saved = config.saved->load();
    if (saved) {
      if (const auto why = table_mismatch(*saved, config.name, config.shards)) {
        spdlog::warn("saved table ignored: {}", *why);
        saved.reset();
      }
    }
    // The newer of the two: a table file newer than the saved table wins.
    if (saved && (!start || saved->version > start->version)) {
      spdlog::info("starting from the saved table version {} ({})", saved->version,
                   config.saved->path());
    }
    start = newer_table(std::move(start), std::move(saved));
  }
  if (start) {
    if (!start->find_server(config.name)) {
      spdlog::warn("{} is not in the table (version {}): it owns no ids and answers MOVED",
                   config.name, start->version);
    }
    config.router = Router::compile(std::move(*start));
  }
  HashServer server(std::move(config));
  server.run();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return imhash::run_main("hash_server", hash_server_main, argc, argv);
}
