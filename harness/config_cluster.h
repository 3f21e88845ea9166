// ConfigCluster: a config server, hash servers and login servers started for a test on loopback
// (or each on a host of its own in a network namespace: ConfigClusterOptions::hosts), steered
// through the real imctl, with a fresh state directory. Heartbeats are fast (100 ms) so tests of
// DOWN, convergence and purges take a second, not minutes. Every process is killed when the
// fixture dies. Used from the test's thread.
#pragma once

#include <boost/json.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/binaries.h"
#include "harness/child_process.h"

namespace imhash::test {

// Where one daemon runs, in a cluster of hosts in network namespaces (harness/netns.h).
struct NodeHost {
  std::string netns{};    // its network namespace (Hosts::netns(NAME)); "" this one
  std::string address{};  // the IP it listens on and is reached at ("" 127.0.0.1)
  // Set: its exact --listen (hash server) or --udp (login server), instead of ADDRESS:0 (for
  // instance "0.0.0.0:7001", with an --advertise among its hash_args).
  std::string listen{};
};

struct ConfigClusterOptions {
  Binaries binaries = Binaries::built_in();  // the programs started (another build: an A/B)
  int shards = 1;
  int login_threads = 1;
  int heartbeat_ms = 100;
  int grace_ms = 1500;
  std::string failover = "off";
  std::string initial_mode = "range";
  std::string state_dir{};         // default: a fresh directory per test process
  bool metrics = false;            // --metrics 127.0.0.1:0 on every daemon
  std::string admin_token_file{};  // set: config_server --admin-token-file, imctl --token-file
  std::string cluster_key_file{};  // set: --cluster-key-file on every daemon
  std::vector<std::string> config_args{};  // more config_server flags
  std::vector<std::string> tls_flags{};  // set: these --tls-cert/--tls-key/--tls-ca on every daemon
  std::map<int, std::vector<std::string>> hash_args{};  // more flags for hash server i
  // Set ("etcd://HOST:PORT,.../PREFIX"): every config server runs with --store instead of a state
  // directory, and there are `config_servers` of them (cfg0, cfg1, ...), one leading; nodes and
  // imctl are given all of their addresses.
  std::string store{};
  int config_servers = 1;
  int lease_ttl_s = 2;  // with `store`
  // By node name ("cfg0", "hash1", "login1"; "imctl": where imctl runs, which must reach the admin
  // addresses): where each runs. A node not named runs here, on 127.0.0.1. Off loopback the
  // daemons need credentials (admin_token_file, cluster_key_file: docs/security.md), and
  // gets_served() and held(), which talk to the hash servers from the test's own namespace, do
  // not reach hash servers in other namespaces.
  std::map<std::string, NodeHost> hosts{};
};

struct ImctlResult {
  int exit_code = -1;
  std::string out;
};

class ConfigCluster {
 public:
  explicit ConfigCluster(ConfigClusterOptions options = {});
  ~ConfigCluster();

  // Starts (or restarts, keeping the state directory) every config server on the same ports.
  void start_config();
  void kill_config();  // SIGKILL, every one
  // Config server i (0-based) alone.
  void start_config(int i);
  void kill_config(int i);
  // The config server that leads now, as its status says (-1: none answers as the leader).
  int leader();
  // hash server "hash<i>" (i from 1), registered with the config server (unless
  // `wait_registered` is false: then it returns once the server listens).
  void start_hash(int i, bool wait_registered = true);
  void kill_hash(int i);
  // login server "login<i>", returning its UDP port (login_address(i): the whole address).
  uint16_t start_login(int i, std::vector<std::string> extra = {});

  // A serving cluster: the config server, hash servers hash1..hashN added to the table, login1,
  // all converged on the latest version; returns login1's UDP port. Throws if any step fails.
  uint16_t start_serving(int hash_servers);

  ImctlResult imctl(std::vector<std::string> args);
  // imctl --json ARGS, parsed; fails the test when imctl fails.
  boost::json::value imctl_json(std::vector<std::string> args);
  // Polls `imctl status` (bounded) until every node that is up runs `version`; returns whether
  // it happened.
  bool wait_converged(uint64_t version, int expected_nodes);
  uint64_t version();
  // The records hash server "hash<i>" reported in its latest heartbeat (imctl servers; 0 if it is
  // not in the table or has not reported).
  uint64_t records(int i);
  // GETs (LOOKUPs) the running hash servers have served, over all their shards (asked over the
  // frame protocol): how far a load has got, for a test that waits for it.
  uint64_t gets_served();
  // How many of the ids in [lo, hi] hash server `i` holds, whoever owns them now (GET with
  // kFlagAnyOwner on each of its shards): what a purge left.
  size_t held(int i, uint64_t lo, uint64_t hi);

  // Every config server's node (admin) address, joined by commas.
  std::string config_address() const;
  std::string admin_address() const;
  const std::string& admin_address(int i) const { return admin_addrs_.at(static_cast<size_t>(i)); }
  const std::string& hash_address(int i) { return hash_addr_.at(i); }
  ChildProcess& hash(int i) { return *hash_.at(i); }
  ChildProcess& login(int i) { return *login_.at(i); }
  const std::string& login_address(int i) { return login_addr_.at(i); }  // its UDP address
  ChildProcess& config(int i = 0) { return *configs_.at(static_cast<size_t>(i)); }
  // With options.metrics: each daemon's /metrics address ("" without).
  const std::string& config_metrics() const { return config_metrics_; }
  const std::string& hash_metrics(int i) { return hash_metrics_[i]; }
  const std::string& login_metrics(int i) { return login_metrics_[i]; }

 private:
  // --cluster-key-file and the --tls-* flags, as the options ask.
  void add_cluster_key(std::vector<std::string>& args) const;
  // Where node `name` runs (options.hosts), and the IP it listens on.
  NodeHost host_of(const std::string& name) const;
  std::string ip_of(const std::string& name) const;
  ChildOptions imctl_options() const;
  // Starts `binary` as node `name` on its host with `args`, plus --metrics and the cluster key
  // as the options say; waits for its listening lines: `address` gets the first, `metrics` the
  // /metrics one (with options.metrics).
  std::unique_ptr<ChildProcess> start_node(const std::string& binary, const std::string& name,
                                           std::vector<std::string> args, std::string& address,
                                           std::string& metrics) const;
  ConfigClusterOptions options_;
  std::vector<uint8_t> cluster_key_;  // the key in options_.cluster_key_file (for FrameClient)
  std::vector<std::unique_ptr<ChildProcess>> configs_;
  std::vector<std::string> config_addrs_;  // "127.0.0.1:0" until started
  std::vector<std::string> admin_addrs_;
  std::map<int, std::unique_ptr<ChildProcess>> hash_;
  std::map<int, std::string> hash_addr_;
  std::map<int, std::unique_ptr<ChildProcess>> login_;
  std::map<int, std::string> login_addr_;
  std::string config_metrics_;
  std::map<int, std::string> hash_metrics_, login_metrics_;
};

}  // namespace imhash::test
