// hash_server: keeps id -> (endpoint, last seen) records in memory, one shard per thread.
#include <spdlog/spdlog.h>

#include <thread>

#include "common/node_control.h"
#include "common/options.h"
#include "common/routing_table.h"
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
      "SIGHUP re-reads it");
  NodeControl::add_options(opts,
                           "config server HOST:PORT: register there, receive tables and purge "
                           "commands; with --table too, the file is the starting table until the "
                           "config server pushes one");
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
  if (opts.has("table")) {
    config.table_file = opts.get<std::string>("table");
    auto loaded = load_table_file(config.table_file);
    if (!loaded.table) throw ConfigError(loaded.error);
    if (const auto why = table_mismatch(*loaded.table, config.name, config.shards)) {
      throw ConfigError(*why);
    }
    if (!loaded.table->find_server(config.name)) {
      spdlog::warn("{} is not in the table (version {}): it owns no ids and answers MOVED",
                   config.name, loaded.table->version);
    }
    config.router = Router::compile(std::move(*loaded.table));
  }
  HashServer server(std::move(config));
  server.run();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return imhash::run_main("hash_server", hash_server_main, argc, argv);
}
