// Cluster: hash servers and a login server started for a test on loopback, from a table file the
// fixture writes (modulo mode with the identity hash by default, so the owner of id N is hash
// server N mod count). Every process is killed when the Cluster dies. Used from the test's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/binaries.h"
#include "harness/child_process.h"

namespace imhash::test {

struct ClusterOptions {
  Binaries binaries = Binaries::built_in();  // the programs started (another build: an A/B)
  int hash_servers = 3;
  int shards = 2;
  int login_threads = 2;
  int timeout_ms = 100;
  std::string table_file{};  // default: cluster_table.json in the run's directory (RunLogs)
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions options = {});

  // Writes the table file: `version`, modulo identity over `servers` (indexes into hash servers).
  void write_table(uint64_t version, const std::vector<int>& servers) const;
  void start_login(std::vector<std::string> extra_args = {});
  // Kills hash server i (SIGKILL) / starts it again on the same port.
  void kill_hash(int i);
  void restart_hash(int i);

  // GETs (LOOKUPs) the hash servers have served, over all their shards (asked over the frame
  // protocol): how far a load has got, for a test that waits for it.
  uint64_t gets_served() const;

  ChildProcess& hash(int i) { return *hash_[static_cast<size_t>(i)]; }
  ChildProcess& login() { return *login_; }
  uint16_t udp_port() const { return udp_port_; }
  const std::string& hash_address(int i) const { return hash_addr_[static_cast<size_t>(i)]; }
  const ClusterOptions& options() const { return options_; }

 private:
  void start_hash(int i, const std::string& listen);

  ClusterOptions options_;
  std::vector<std::unique_ptr<ChildProcess>> hash_;
  std::vector<std::string> hash_addr_;
  std::unique_ptr<ChildProcess> login_;
  uint16_t udp_port_ = 0;
};

}  // namespace imhash::test
