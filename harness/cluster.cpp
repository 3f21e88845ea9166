#include "harness/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "harness/frame_client.h"
#include "harness/run_logs.h"

namespace imhash::test {

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  if (options_.table_file.empty()) {
    options_.table_file = RunLogs::dir() + "/cluster_table.json";
  }
  hash_.resize(static_cast<size_t>(options_.hash_servers));
  hash_addr_.resize(hash_.size());
  for (int i = 0; i < options_.hash_servers; ++i) start_hash(i, "127.0.0.1:0");
}

void Cluster::start_hash(int i, const std::string& listen) {
  auto& slot = hash_[static_cast<size_t>(i)];
  slot = std::make_unique<ChildProcess>(
      options_.binaries.hash_server,
      std::vector<std::string>{"--listen", listen, "--name", "hash" + std::to_string(i + 1),
                               "--shards", std::to_string(options_.shards)},
      ChildOptions{.name = "hash" + std::to_string(i + 1)});
  hash_addr_[static_cast<size_t>(i)] = slot->wait_listening()[0];
}

void Cluster::write_table(uint64_t version, const std::vector<int>& servers) const {
  std::ofstream out(options_.table_file + ".tmp");
  out << "{\"version\": " << version << ", \"mode\": \"modulo\", \"modulo_hash\": \"identity\", "
      << "\"servers\": [";
  for (size_t k = 0; k < servers.size(); ++k) {
    const int i = servers[k];
    out << (k ? ", " : "") << "{\"name\": \"hash" << i + 1 << "\", \"address\": \""
        << hash_addr_[static_cast<size_t>(i)] << "\", \"shards\": " << options_.shards << "}";
  }
  out << "]}\n";
  out.close();
  std::rename((options_.table_file + ".tmp").c_str(), options_.table_file.c_str());
}

void Cluster::start_login(std::vector<std::string> extra_args) {
  std::vector<std::string> args = {"--udp",        "127.0.0.1:0",
                                   "--table",      options_.table_file,
                                   "--threads",    std::to_string(options_.login_threads),
                                   "--timeout-ms", std::to_string(options_.timeout_ms)};
  // Every simulated user shares 127.0.0.1: no per-source limit unless the test sets one.
  if (std::find(extra_args.begin(), extra_args.end(), "--rate-limit") == extra_args.end()) {
    args.insert(args.end(), {"--rate-limit", "0"});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  login_ = std::make_unique<ChildProcess>(options_.binaries.login_server, args,
                                          ChildOptions{.name = "login"});
  udp_port_ = port_of(login_->wait_listening()[0]);
}

void Cluster::kill_hash(int i) { hash(i).stop(SIGKILL); }

void Cluster::restart_hash(int i) { start_hash(i, hash_addr_[static_cast<size_t>(i)]); }

uint64_t Cluster::gets_served() const {
  uint64_t total = 0;
  for (const std::string& address : hash_addr_) {
    for (int shard = 0; shard < options_.shards; ++shard) {
      total += FrameClient(port_of(address), static_cast<uint16_t>(shard)).stat(frame::kStatGets);
    }
  }
  return total;
}

}  // namespace imhash::test
