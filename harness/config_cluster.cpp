#include "harness/config_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "common/security/token.h"
#include "harness/frame_client.h"
#include "harness/run_logs.h"
#include "harness/wait_until.h"

namespace imhash::test {

ConfigCluster::ConfigCluster(ConfigClusterOptions options) : options_(std::move(options)) {
  // ctest runs tests side by side in one directory: each gets its own state.
  if (options_.state_dir.empty()) options_.state_dir = "config_state." + std::to_string(getpid());
  std::filesystem::remove_all(options_.state_dir);
  if (!options_.cluster_key_file.empty()) {
    std::ifstream in(options_.cluster_key_file);
    const std::string hex((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string error;
    auto key = parse_hex_key(hex, error);
    if (!key) throw std::runtime_error(options_.cluster_key_file + ": " + error);
    cluster_key_ = std::move(*key);
  }
}

ConfigCluster::~ConfigCluster() {
  login_.clear();
  hash_.clear();
  configs_.clear();
  std::error_code ec;
  std::filesystem::remove_all(options_.state_dir, ec);
}

NodeHost ConfigCluster::host_of(const std::string& name) const {
  const auto it = options_.hosts.find(name);
  return it == options_.hosts.end() ? NodeHost{} : it->second;
}

std::string ConfigCluster::ip_of(const std::string& name) const {
  const NodeHost h = host_of(name);
  return h.address.empty() ? "127.0.0.1" : h.address;
}

// Every imctl call's stderr in one log of the run, without a start line each: the tests poll
// `imctl status` many times a second, and only what imctl complained of is worth a line.
ChildOptions ConfigCluster::imctl_options() const {
  return ChildOptions{.stderr_log = RunLogs::path("imctl"), .netns = host_of("imctl").netns};
}

void ConfigCluster::start_config() {
  for (int i = 0; i < options_.config_servers; ++i) start_config(i);
}

void ConfigCluster::start_config(int i) {
  const size_t at = static_cast<size_t>(i);
  const size_t n = static_cast<size_t>(std::max(options_.config_servers, 1));
  config_addrs_.resize(n);
  admin_addrs_.resize(n);
  configs_.resize(n);
  const std::string name = "cfg" + std::to_string(i);
  const std::string ip = ip_of(name);
  // The first start takes any ports; a restart the same ones.
  for (size_t j = 0; j < n; ++j) {
    const std::string any = ip_of("cfg" + std::to_string(j)) + ":0";
    if (config_addrs_[j].empty()) config_addrs_[j] = any;
    if (admin_addrs_[j].empty()) admin_addrs_[j] = any;
  }
  std::vector<std::string> args = {"--listen",       config_addrs_.at(at),
                                   "--admin",        admin_addrs_.at(at),
                                   "--heartbeat-ms", std::to_string(options_.heartbeat_ms),
                                   "--grace-ms",     std::to_string(options_.grace_ms),
                                   "--failover",     options_.failover,
                                   "--initial-mode", options_.initial_mode};
  if (options_.store.empty()) {
    args.insert(args.end(), {"--state-dir", options_.state_dir});
  } else {
    args.insert(args.end(), {"--store", options_.store, "--name", name, "--lease-ttl-s",
                             std::to_string(options_.lease_ttl_s)});
  }
  if (options_.metrics) args.insert(args.end(), {"--metrics", ip + ":0"});
  if (!options_.admin_token_file.empty()) {
    args.insert(args.end(), {"--admin-token-file", options_.admin_token_file});
  }
  add_cluster_key(args);
  args.insert(args.end(), options_.config_args.begin(), options_.config_args.end());
  configs_[at] =
      std::make_unique<ChildProcess>(options_.binaries.config_server, args,
                                     ChildOptions{.name = name, .netns = host_of(name).netns});
  const auto addrs = configs_[at]->wait_listening(options_.metrics ? 3 : 2);
  config_addrs_[at] = addrs[0];
  admin_addrs_[at] = addrs[1];
  if (options_.metrics && i == 0) config_metrics_ = addrs[2];
}

void ConfigCluster::kill_config() {
  for (int i = 0; i < static_cast<int>(configs_.size()); ++i) kill_config(i);
}

void ConfigCluster::kill_config(int i) {
  if (configs_.at(static_cast<size_t>(i))) configs_[static_cast<size_t>(i)]->stop(SIGKILL);
}

namespace {
std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& a : list) out += (out.empty() ? "" : ",") + a;
  return out;
}
}  // namespace

std::string ConfigCluster::config_address() const {
  return config_addrs_.empty() ? "127.0.0.1:0" : joined(config_addrs_);
}
std::string ConfigCluster::admin_address() const {
  return admin_addrs_.empty() ? "127.0.0.1:0" : joined(admin_addrs_);
}

int ConfigCluster::leader() {
  for (size_t i = 0; i < admin_addrs_.size(); ++i) {
    if (!configs_[i] || !configs_[i]->running()) continue;
    std::vector<std::string> args = {"--admin", admin_addrs_[i], "--json", "status"};
    if (!options_.admin_token_file.empty()) {
      args.insert(args.begin(), {"--token-file", options_.admin_token_file});
    }
    ChildProcess p(options_.binaries.imctl, args, imctl_options());
    const std::string out = p.read_all();
    if (p.stop(0) != 0) continue;  // nobody it could reach leads
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(out, ec);
    const auto* o = ec ? nullptr : v.if_object();
    const auto* plane = o ? o->if_contains("control_plane") : nullptr;
    const auto* role =
        plane && plane->is_object() ? plane->as_object().if_contains("role") : nullptr;
    // imctl asked a standby follows it to the leader: the answer is this one's only if the
    // leader it names is this config server.
    const auto* who =
        plane && plane->is_object() ? plane->as_object().if_contains("leader") : nullptr;
    const auto* admin = who && who->is_object() ? who->as_object().if_contains("admin") : nullptr;
    if (!role || !role->is_string()) continue;
    if (role->as_string() == "single" ||
        (role->as_string() == "leader" && admin && admin->is_string() &&
         admin->as_string() == admin_addrs_[i])) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::unique_ptr<ChildProcess> ConfigCluster::start_node(const std::string& binary,
                                                        const std::string& name,
                                                        std::vector<std::string> args,
                                                        std::string& address,
                                                        std::string& metrics) const {
  if (options_.metrics) args.insert(args.end(), {"--metrics", ip_of(name) + ":0"});
  add_cluster_key(args);
  auto node = std::make_unique<ChildProcess>(
      binary, std::move(args), ChildOptions{.name = name, .netns = host_of(name).netns});
  const auto addrs = node->wait_listening(options_.metrics ? 2 : 1);
  address = addrs[0];
  if (options_.metrics) metrics = addrs[1];
  return node;
}

void ConfigCluster::add_cluster_key(std::vector<std::string>& args) const {
  if (!options_.cluster_key_file.empty()) {
    args.insert(args.end(), {"--cluster-key-file", options_.cluster_key_file});
  }
  args.insert(args.end(), options_.tls_flags.begin(), options_.tls_flags.end());
}

void ConfigCluster::start_hash(int i, bool wait_registered) {
  const std::string name = "hash" + std::to_string(i);
  const NodeHost host = host_of(name);
  const auto it = hash_addr_.find(i);
  // A restart listens where the first start did (with a fixed --listen: that again).
  const std::string listen = !host.listen.empty()     ? host.listen
                             : it == hash_addr_.end() ? ip_of(name) + ":0"
                                                      : it->second;
  std::vector<std::string> args = {"--listen", listen,          "--name",
                                   name,       "--shards",      std::to_string(options_.shards),
                                   "--config", config_address()};
  if (const auto extra = options_.hash_args.find(i); extra != options_.hash_args.end()) {
    args.insert(args.end(), extra->second.begin(), extra->second.end());
  }
  hash_[i] = start_node(options_.binaries.hash_server, name, std::move(args), hash_addr_[i],
                        hash_metrics_[i]);
  // Registered with the config server (so `imctl server add hashN` knows its address)?
  if (!wait_registered || std::none_of(configs_.begin(), configs_.end(),
                                       [](const auto& c) { return c && c->running(); })) {
    return;
  }
  const bool registered = wait_until([&] {
    const auto status = imctl_json({"status"});
    for (const auto& n : status.as_object().at("nodes").as_array()) {
      const auto& o = n.as_object();
      if (o.at("name").as_string() == name && o.at("state").as_string() == "up" &&
          o.at("connected").as_bool()) {
        return true;
      }
    }
    return false;
  });
  if (!registered) throw std::runtime_error(name + " did not register with the config server");
}

void ConfigCluster::kill_hash(int i) { hash_.at(i)->stop(SIGKILL); }

uint16_t ConfigCluster::start_login(int i, std::vector<std::string> extra) {
  const std::string name = "login" + std::to_string(i);
  const NodeHost host = host_of(name);
  std::vector<std::string> args = {
      "--udp",     host.listen.empty() ? ip_of(name) + ":0" : host.listen,
      "--config",  config_address(),
      "--name",    name,
      "--threads", std::to_string(options_.login_threads)};
  // Every simulated user shares 127.0.0.1: no per-source limit unless the test sets one.
  if (std::find(extra.begin(), extra.end(), "--rate-limit") == extra.end()) {
    args.insert(args.end(), {"--rate-limit", "0"});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  login_[i] = start_node(options_.binaries.login_server, name, std::move(args), login_addr_[i],
                         login_metrics_[i]);
  return port_of(login_addr_[i]);
}

uint16_t ConfigCluster::start_serving(int hash_servers) {
  start_config();
  std::vector<std::string> add = {"server", "add"};
  for (int i = 1; i <= hash_servers; ++i) {
    start_hash(i);
    add.push_back("hash" + std::to_string(i));
  }
  if (const auto r = imctl(add); r.exit_code != 0) throw std::runtime_error("imctl: " + r.out);
  const uint16_t udp = start_login(1);
  if (!wait_converged(version(), hash_servers + 1)) {
    throw std::runtime_error("the cluster did not converge");
  }
  return udp;
}

uint64_t ConfigCluster::records(int i) {
  const std::string name = "hash" + std::to_string(i);
  const boost::json::value status = imctl_json({"status"});
  for (const auto& n : status.as_object().at("nodes").as_array()) {
    const auto& o = n.as_object();
    if (o.at("role").as_string() != "hash" || o.at("name").as_string() != name) continue;
    const auto* r = o.at("stats").as_object().if_contains("records");
    return r ? r->to_number<uint64_t>() : 0;
  }
  return 0;
}

ImctlResult ConfigCluster::imctl(std::vector<std::string> args) {
  args.insert(args.begin(), {"--admin", admin_address()});
  if (!options_.admin_token_file.empty()) {
    args.insert(args.begin(), {"--token-file", options_.admin_token_file});
  }
  ChildProcess p(options_.binaries.imctl, args, imctl_options());
  ImctlResult r;
  r.out = p.read_all();
  r.exit_code = p.stop(0);
  return r;
}

boost::json::value ConfigCluster::imctl_json(std::vector<std::string> args) {
  args.insert(args.begin(), "--json");
  auto r = imctl(args);
  if (r.exit_code != 0) throw std::runtime_error("imctl failed: " + r.out);
  return boost::json::parse(r.out);
}

uint64_t ConfigCluster::version() {
  return imctl_json({"status"}).as_object().at("version").to_number<uint64_t>();
}

bool ConfigCluster::wait_converged(uint64_t version, int expected_nodes) {
  return wait_until(
      [&] {
        const auto st = imctl_json({"status"});
        int at_version = 0;
        for (const auto& n : st.as_object().at("nodes").as_array()) {
          const auto& o = n.as_object();
          if (o.at("state").as_string() == "up" &&
              o.at("version").to_number<uint64_t>() >= version) {
            ++at_version;
          }
        }
        return at_version >= expected_nodes;
      },
      kPatience, std::chrono::milliseconds(20));
}

uint64_t ConfigCluster::gets_served() {
  uint64_t total = 0;
  for (const auto& [i, process] : hash_) {
    if (!process->running()) continue;
    for (int shard = 0; shard < options_.shards; ++shard) {
      total +=
          FrameClient(port_of(hash_addr_.at(i)), static_cast<uint16_t>(shard), "test", cluster_key_)
              .stat(frame::kStatGets);
    }
  }
  return total;
}

size_t ConfigCluster::held(int i, uint64_t lo, uint64_t hi) {
  size_t found = 0;
  for (int shard = 0; shard < options_.shards; ++shard) {
    FrameClient fc(port_of(hash_addr_.at(i)), static_cast<uint16_t>(shard));
    std::vector<frame::Request> gets;
    for (uint64_t id = lo; id <= hi; ++id) {
      gets.push_back(frame::Request{.type = frame::FrameType::kGet,
                                    .flags = frame::kFlagAnyOwner,
                                    .correlation = static_cast<uint32_t>(id),
                                    .id = id});
    }
    for (const auto& r : fc.call(gets)) found += r.r.status == frame::FrameStatus::kOk;
  }
  return found;
}

}  // namespace imhash::test
