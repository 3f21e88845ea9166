// EtcdCluster: a real etcd cluster (Debian's etcd-server 3.4: /usr/bin/etcd, or $IMHASH_ETCD) of
// N members for integration tests, on loopback or each on a host (harness/netns.h), in a fresh
// temporary directory holding each member's data dir, removed with the object (what test processes
// that died without unwinding left is removed by the next cluster: etcd 3.4 preallocates 128 MB of
// WAL a member). Each member's log is a file of the current run (harness/run_logs.h: etcd.m0.log,
// ...; a second cluster in the same run etcd-2.m0.log), kept after the cluster is gone.
// Members can be SIGKILLed and restarted on the same ports and data dir; every member still
// running is SIGKILLed when the object dies, and each member also dies with the test process
// (PR_SET_PDEATHSIG), so neither a failing test nor a test binary killed by ctest's timeout leaves
// etcd behind. etcd cannot listen on port 0, so the ports are picked here: on loopback, free ones
// below the kernel's ephemeral range, which no port-0 bind or outgoing connection of another test
// can take while a member is down; on a host, whose namespace has a port space of its own, etcd's
// own 2379 (clients) and 2380 (peers). The health checks are made from each member's namespace (a
// thread that enters it: harness/netns_enter.h), since the test's cannot reach the hosts. Used
// from the test's thread (the one that made it: the members die with that thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/temp_dir.h"

namespace imhash::test {

// Where a member runs: in network namespace `netns`, on `address` (both set: a host of
// harness/netns.h, `Hosts::netns(NAME)` and `Hosts::address(NAME)`), or, both empty, on the test's
// own loopback.
struct EtcdMemberHost {
  std::string netns{};
  std::string address{};
};

struct EtcdClusterOptions {
  size_t members = 3;
  // One place for each member (member i on hosts[i]), or empty: all on loopback. The members must
  // reach each other: all on hosts, or all on loopback (std::invalid_argument otherwise).
  std::vector<EtcdMemberHost> hosts{};
};

class EtcdCluster {
 public:
  // Starts the members (m0, m1, ...) and waits (bounded) until every one is healthy; throws naming
  // the member and the tail of its log if one does not get there.
  explicit EtcdCluster(EtcdClusterOptions options);
  explicit EtcdCluster(size_t members = 3);  // on loopback
  ~EtcdCluster();                            // SIGKILLs every member still running
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  size_t size() const;
  std::string client_address(size_t i) const;  // "127.0.0.1:PORT", or on a host "10.77.X.Y:2379"
  std::string endpoints() const;               // every client address joined by commas
  void kill(size_t i);     // SIGKILL member i, waits for it to be gone (no-op if it is not running)
  void restart(size_t i);  // starts member i again on the same ports and data dir; does not wait
  void kill_all();
  void restart_all();      // every member that is not running, again; does not wait
  bool healthy(size_t i);  // GET /health (from its namespace) answers health true now
  // The member that is raft leader as the members running now say (POST /v3/maintenance/status);
  // waits (bounded) until they agree on one; throws if they do not.
  size_t raft_leader();
  // Waits until member i is healthy; throws (with its log tail) on timeout or if it is not running.
  void wait_healthy(size_t i, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Waits until a majority of the members is healthy; throws (with log tails) on timeout.
  void wait_quorum(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  std::string log_tail(size_t i) const;  // last ~40 lines of its log, for failure messages

 private:
  struct Member {
    std::string name;   // "m0"
    std::string netns;  // "": the test's own
    std::string host;   // the address it listens on: "127.0.0.1", or its host's
    uint16_t client_port = 0;
    uint16_t peer_port = 0;
    std::string data_dir;
    std::string log;       // etcd's stderr (and stdout), appended to across restarts
    pid_t pid = -1;        // -1: not running (killed, or exited and reaped)
    int wait_status = -1;  // of its last exit that running() reaped (-1: none)
  };
  // Picks new ports and a new cluster token for a fresh cluster.
  void configure();
  void start(size_t i);
  // Reaps member i if it has exited by itself; whether it is running.
  bool running(size_t i);
  // "etcd member m1 (client 127.0.0.1:PORT, peer ...) WHAT; the end of its log:\n...".
  std::string failure(size_t i, const std::string& what) const;
  const Member& member(size_t i) const;

  std::string etcd_;  // the binary
  bool on_hosts_ = false;
  std::string log_stem_;  // "etcd" (or "etcd-2", ...): the members log to RUN_DIR/STEM.mI.log
  std::unique_ptr<TempDir> dir_;
  std::vector<Member> members_;
  std::string token_;            // --initial-cluster-token
  std::string initial_cluster_;  // --initial-cluster
};

}  // namespace imhash::test
