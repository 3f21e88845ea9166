// The cluster the e2e, latency and storm scenarios measure through: N hash servers (1 shard
// each unless told), one login server (1 thread), on loopback, started with one build's programs
// through the harness's ConfigCluster. bench.sh started it from a table file (scripts/cluster.sh,
// ring mode); here a config server (file store, the daemons' default heartbeat of 1000 ms and ring
// mode) makes the same table, so that the driver has no start-up of its own: it adds one mostly
// idle process. The links carry the cluster key ("on"), not ("off"), or the key and TLS ("tls");
// each record has `replicas` copies. Main thread only.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/binaries.h"
#include "harness/config_cluster.h"
#include "harness/tls_certs.h"
#include "tools/bench/bench.h"

namespace imhash::bench {

struct E2eTopology {
  int servers = 1;
  int replicas = 1;
  std::string keys = "on";  // "off", "on", "tls"
  int shards = 1;           // per hash server
  bool metrics = false;     // a /metrics listener on every daemon (storm reads the shards' turns)
  // "hash1-r1-on": a directory name for its logs.
  std::string name() const;
  // "1 hash server(s) (1 shard each), 1 login thread, cluster key on"
  std::string label() const;
  // {servers, replicas, keys, label}: what a result says of the topology it measured.
  boost::json::object figures() const;
};

// The topologies a run measures, from its settings `servers` (cluster sizes), `replicas` and
// `keys` (each a list; sizes with fewer servers than copies are skipped, as bench.sh did).
std::vector<E2eTopology> read_topologies(Settings& settings);

// The secrets of a run, made once in the work directory: the cluster key file and, if a
// topology wants TLS, certificates (scripts/tls_certs.sh through the harness's TlsCerts).
class E2eSecrets {
 public:
  E2eSecrets(const std::string& work_dir, bool tls);
  std::string key_file;
  std::vector<std::string> tls_flags;  // empty without TLS

 private:
  std::unique_ptr<test::TlsCerts> certs_;
};

class E2eCluster {
 public:
  // Starts and waits until every node runs the latest table; throws if it does not.
  E2eCluster(const test::Binaries& binaries, const E2eTopology& topology,
             const E2eSecrets& secrets);
  // "127.0.0.1:PORT" of the login server's UDP socket: udp_sim's --target.
  const std::string& target() const { return target_; }
  test::ConfigCluster& cluster() { return *cluster_; }

 private:
  std::unique_ptr<test::ConfigCluster> cluster_;
  std::string target_;
};

}  // namespace imhash::bench
