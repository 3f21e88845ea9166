// NemesisCluster: the cluster of hosts the nemesis (harness/nemesis.h) breaks, started in one
// place for the integration test and the benchmark driver (issue 33). Each program runs on a host
// of its own in a network namespace (harness/netns.h), with the cluster key on every link and the
// admin token on the admin API:
//
//   c0 c1 c2   an etcd member and a config server each (the state in etcd, one config leader)
//   h1..h4     hash servers, 2 copies of every record (range mode: ids 1..4N in four ranges)
//   l1 l2      login servers
//   k1 k2      client hosts (udp_sim runs there, through either login server)
//   op         where imctl runs: the operator, never faulted
//
// Throws HostsUnavailable where this machine cannot make hosts (no root, no namespaces): the
// caller decides whether that is a skip (hosts_required()). Used from the test's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/binaries.h"
#include "harness/config_cluster.h"
#include "harness/etcd_cluster.h"
#include "harness/netns.h"
#include "harness/secrets.h"

namespace imhash::test {

struct NemesisClusterOptions {
  Binaries binaries = Binaries::built_in();
  int hash_servers = 4;
  int login_servers = 2;
  int clients = 2;
  int replicas = 2;
  int shards = 2;
  // Heartbeats every 200 ms: a node is DOWN after 600 ms (3 missed), the "DOWN" the pauses are
  // shorter and longer than.
  int heartbeat_ms = 200;
  // The ids the ranges cover at the start: 1..users, a quarter per hash server (run_nemesis sets
  // it to its clients' ids).
  uint64_t users = 40000;
  std::vector<std::string> login_args{};  // more login_server flags
};

class NemesisCluster {
 public:
  explicit NemesisCluster(NemesisClusterOptions options = {});
  ~NemesisCluster();
  NemesisCluster(const NemesisCluster&) = delete;
  NemesisCluster& operator=(const NemesisCluster&) = delete;

  // Starts etcd, the config servers, the hash servers (ranges assigned, replicas on) and the login
  // servers, and waits until every node runs the latest table. Throws if a step fails.
  void start();

  const NemesisClusterOptions& options() const { return options_; }
  Hosts& hosts() { return *hosts_; }
  EtcdCluster& etcd() { return *etcd_; }
  ConfigCluster& cluster() { return *cluster_; }
  // Host names: config_host(0..2) "c0", hash_host(1..) "h1", login_host(1..) "l1",
  // client_host(1..) "k1".
  static std::string config_host(int i) { return "c" + std::to_string(i); }
  static std::string hash_host(int i) { return "h" + std::to_string(i); }
  static std::string login_host(int i) { return "l" + std::to_string(i); }
  static std::string client_host(int i) { return "k" + std::to_string(i); }
  // Login server i's UDP address ("10.77.X.21:PORT").
  std::string login_udp(int i) { return cluster_->login_address(i); }
  // The ids hash server i owns at the start ("LO-HI").
  std::string initial_range(int i) const;

 private:
  NemesisClusterOptions options_;
  std::unique_ptr<Hosts> hosts_;
  ClusterSecrets secrets_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<ConfigCluster> cluster_;
};

}  // namespace imhash::test
