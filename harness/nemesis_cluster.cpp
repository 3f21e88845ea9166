#include "harness/nemesis_cluster.h"

#include <stdexcept>

namespace imhash::test {

NemesisCluster::NemesisCluster(NemesisClusterOptions options) : options_(std::move(options)) {
  hosts_ = std::make_unique<Hosts>(HostsOptions{.binaries = options_.binaries});
  std::vector<EtcdMemberHost> members;
  for (int i = 0; i < 3; ++i) {
    const std::string address = hosts_->add(config_host(i), 1 + i);
    members.push_back({.netns = hosts_->netns(config_host(i)), .address = address});
  }
  for (int i = 1; i <= options_.hash_servers; ++i) hosts_->add(hash_host(i), 10 + i);
  for (int i = 1; i <= options_.login_servers; ++i) hosts_->add(login_host(i), 20 + i);
  for (int i = 1; i <= options_.clients; ++i) hosts_->add(client_host(i), 30 + i);
  hosts_->add("op", 40);
  secrets_ = make_cluster_secrets("nemesis");
  etcd_ = std::make_unique<EtcdCluster>(EtcdClusterOptions{.members = 3, .hosts = members});

  ConfigClusterOptions o{.binaries = options_.binaries,
                         .shards = options_.shards,
                         .login_threads = 2,
                         .heartbeat_ms = options_.heartbeat_ms,
                         .grace_ms = 10000,
                         .initial_mode = "range",
                         .admin_token_file = secrets_.token_file,
                         .cluster_key_file = secrets_.key_file,
                         .store = "etcd://" + etcd_->endpoints() + "/nemesis",
                         .config_servers = 3};
  for (int i = 0; i < 3; ++i) {
    o.hosts["cfg" + std::to_string(i)] = {.netns = hosts_->netns(config_host(i)),
                                          .address = hosts_->address(config_host(i))};
  }
  for (int i = 1; i <= options_.hash_servers; ++i) {
    o.hosts["hash" + std::to_string(i)] = {.netns = hosts_->netns(hash_host(i)),
                                           .address = hosts_->address(hash_host(i))};
  }
  for (int i = 1; i <= options_.login_servers; ++i) {
    o.hosts["login" + std::to_string(i)] = {.netns = hosts_->netns(login_host(i)),
                                            .address = hosts_->address(login_host(i))};
  }
  o.hosts["imctl"] = {.netns = hosts_->netns("op")};
  cluster_ = std::make_unique<ConfigCluster>(std::move(o));
}

NemesisCluster::~NemesisCluster() {
  cluster_.reset();  // the daemons first, then etcd, then the namespaces they ran in
  etcd_.reset();
}

std::string NemesisCluster::initial_range(int i) const {
  const uint64_t quarter = options_.users / static_cast<uint64_t>(options_.hash_servers);
  const uint64_t lo = 1 + quarter * static_cast<uint64_t>(i - 1);
  const uint64_t hi = i == options_.hash_servers ? options_.users : lo + quarter - 1;
  return std::to_string(lo) + "-" + std::to_string(hi);
}

void NemesisCluster::start() {
  etcd_->wait_quorum();
  cluster_->start_config();
  std::vector<std::string> add = {"server", "add"};
  for (int i = 1; i <= options_.hash_servers; ++i) {
    cluster_->start_hash(i);
    add.push_back("hash" + std::to_string(i));
  }
  const auto must = [&](std::vector<std::string> args) {
    const ImctlResult r = cluster_->imctl(args);
    if (r.exit_code != 0) throw std::runtime_error("imctl failed: " + r.out);
  };
  must(add);
  for (int i = 1; i <= options_.hash_servers; ++i) {
    must({"assign", initial_range(i), "hash" + std::to_string(i)});
  }
  must({"replicas", std::to_string(options_.replicas)});
  for (int i = 1; i <= options_.login_servers; ++i) {
    // Every request answered TIMEOUT or UNAVAILABLE is told step by step in the login server's
    // log: what the checker flags can be traced from the run's files.
    std::vector<std::string> args = options_.login_args;
    args.push_back("--trace-failed-requests");
    cluster_->start_login(i, args);
  }
  if (!cluster_->wait_converged(cluster_->version(),
                                options_.hash_servers + options_.login_servers)) {
    throw std::runtime_error("the nemesis cluster did not converge");
  }
}

}  // namespace imhash::test
