#include "tools/bench/e2e_cluster.h"

#include <filesystem>
#include <stdexcept>

#include "harness/secrets.h"

namespace imhash::bench {

std::string E2eTopology::name() const {
  return "hash" + std::to_string(servers) + "-r" + std::to_string(replicas) + "-" + keys;
}

std::string E2eTopology::label() const {
  std::string s = std::to_string(servers) + " hash server(s) (" + std::to_string(shards) +
                  " shard(s) each), 1 login thread, ";
  s += keys == "tls" ? "cluster key on + TLS" : "cluster key " + keys;
  if (replicas > 1) s += ", " + std::to_string(replicas) + " copies of each record";
  return s;
}

boost::json::object E2eTopology::figures() const {
  return {{"servers", servers}, {"replicas", replicas}, {"keys", keys}, {"label", label()}};
}

std::vector<E2eTopology> read_topologies(Settings& settings) {
  const auto servers = settings.integers("servers", "1,3", "cluster sizes: hash servers, in turn");
  const auto replicas =
      settings.integers("replicas", "1", "copies of each record, in turn (\"1,2\": their cost)");
  const auto keys = settings.words(
      "keys", "on", "cluster key on every link: on, off, tls (key + TLS), in turn (\"off,on\")");
  std::vector<E2eTopology> out;
  for (int64_t n : servers) {
    if (n < 1 || n > 16) throw std::invalid_argument("servers: 1 to 16 hash servers");
    for (int64_t r : replicas) {
      if (r < 1 || r > 3) throw std::invalid_argument("replicas: 1 to 3");
      if (r > n) continue;
      for (const std::string& k : keys) {
        if (k != "on" && k != "off" && k != "tls") {
          throw std::invalid_argument("keys: on, off or tls, not " + k);
        }
        out.push_back(E2eTopology{static_cast<int>(n), static_cast<int>(r), k});
      }
    }
  }
  return out;
}

E2eSecrets::E2eSecrets(const std::string& work_dir, bool tls) {
  key_file = work_dir + "/cluster.key";
  if (!std::filesystem::exists(key_file)) test::write_private(key_file, test::random_hex_key());
  if (tls) {
    certs_ = std::make_unique<test::TlsCerts>(work_dir + "/e2e");
    tls_flags = certs_->flags("hash");  // one certificate for every node, as cluster.sh did
  }
}

E2eCluster::E2eCluster(const test::Binaries& binaries, const E2eTopology& topology,
                       const E2eSecrets& secrets) {
  test::ConfigClusterOptions o;
  o.binaries = binaries;
  o.shards = topology.shards;
  o.metrics = topology.metrics;
  o.login_threads = 1;
  // The daemons' defaults, not the tests' fast heartbeats: a benchmark measures the nodes, and a
  // heartbeat every 100 ms from each would be load of its own.
  o.heartbeat_ms = 1000;
  o.grace_ms = 60000;
  o.initial_mode = "ring";
  o.state_dir = std::filesystem::absolute("config_state").string();
  o.config_args = {"--log-level", "warn"};
  for (int i = 1; i <= topology.servers; ++i) o.hash_args[i] = {"--log-level", "warn"};
  if (topology.keys == "on" || topology.keys == "tls") o.cluster_key_file = secrets.key_file;
  if (topology.keys == "tls") o.tls_flags = secrets.tls_flags;
  cluster_ = std::make_unique<test::ConfigCluster>(o);
  cluster_->start_config();
  std::vector<std::string> add = {"server", "add"};
  for (int i = 1; i <= topology.servers; ++i) {
    cluster_->start_hash(i);
    add.push_back("hash" + std::to_string(i));
  }
  if (const auto r = cluster_->imctl(add); r.exit_code != 0) {
    throw std::runtime_error("imctl server add: " + r.out);
  }
  if (topology.replicas > 1) {
    if (const auto r = cluster_->imctl({"replicas", std::to_string(topology.replicas)});
        r.exit_code != 0) {
      throw std::runtime_error("imctl replicas: " + r.out);
    }
  }
  const uint16_t udp = cluster_->start_login(1, {"--log-level", "warn"});
  if (!cluster_->wait_converged(cluster_->version(), topology.servers + 1)) {
    throw std::runtime_error("the cluster did not converge on its table");
  }
  target_ = "127.0.0.1:" + std::to_string(udp);
}

}  // namespace imhash::bench
