// Nemesis: a seeded, reproducible schedule of faults run against a NemesisCluster while clients
// record a history (issue 33; docs/reliability.md "The nemesis"). Four lanes run side by side,
// so several faults are on at once, each lane one fault at a time:
//
//   hash     kill -9 and an empty restart, SIGSTOP shorter and longer than DOWN, a hash server cut
//            from the login servers (not from the config servers), a login server cut from one
//            hash server. One hash server at a time, and the next fault only once every hash
//            server is up again and no refill runs: with 2 copies of every record, never both.
//   control  the config leader killed or isolated, an etcd member killed; then restarted, and
//            the next once a leader serves and etcd is healthy again.
//   net      loss, duplication, reordering or delay on one hash or login host's link (tc netem;
//            without sch_netem, lossy_relay --link through the hub: Hosts::impair).
//   ops      range moves, replica changes (2 <-> 3) and drains (a server streamed out of the
//            table, then added back), each waiting for its streams and purges to finish.
//
// Each lane draws from its own generator, seeded from the run's seed and the lane, so a seed gives
// the same faults in the same order with the same targets and lengths (each of a lane's kinds once
// in every round of draws, in a random order); when each starts depends
// on how fast the cluster settles (the log has the times). Every fault is logged with its start,
// its end and the evidence that it took effect (the process's state, the routes, the qdisc or the
// relay, the new table version). The windows file tells the history checker (tools/nemesis/) which
// answers the design allows during which fault (docs/reliability.md).
//
// Used from the test's thread: run() drives every lane from it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/nemesis_cluster.h"

namespace imhash::test {

enum class FaultKind : uint8_t {
  kHashKill,
  kHashPauseShort,
  kHashPauseLong,
  kHashCutFromLogins,
  kLoginCutFromHash,
  kConfigLeaderKill,
  kConfigLeaderIsolate,
  kEtcdKill,
  kLinkLoss,
  kLinkDuplicate,
  kLinkReorder,
  kLinkDelay,
  kRangeMove,
  kReplicaChange,
  kDrain,
  kCount
};
inline constexpr size_t kFaultKinds = static_cast<size_t>(FaultKind::kCount);
const char* fault_name(FaultKind kind);  // "hash-kill", ...

struct FaultRecord {
  FaultKind kind = FaultKind::kHashKill;
  std::string target;    // "hash2", "login1-hash3", "cfg0", "etcd m1", "h2 link", "1-2000 hash3"
  std::string detail;    // what exactly: "SIGSTOP 400 ms", "loss 10%", ...
  int64_t start_ns = 0;  // steady clock, as the histories' times
  int64_t end_ns = 0;    // when it was reverted (the start for one-shot operations)
  bool took_effect = false;
  std::string evidence;  // what showed it took effect, or why it did not
};

// The answers the design allows while `fault` is on (and for a slack after), as the history
// checker's rule names joined by commas ("" none): docs/reliability.md, "Windows".
const char* allowed_answers(const FaultRecord& fault);

struct NemesisOptions {
  uint64_t seed = 1;
  // Pauses shorter than DOWN last 100 ms to down - 100 ms; longer ones 2 x down to 5 x down.
  std::chrono::milliseconds down{600};
  // Pause between the end of one fault (settled) and the start of the next, per lane: drawn from
  // [gap / 2, gap * 3 / 2].
  std::chrono::milliseconds hash_gap{1500}, control_gap{3000}, net_gap{1000}, ops_gap{3000};
  // How long one settle may take before the lane logs "not settled" and goes on.
  std::chrono::milliseconds settle_patience{60000};
  // How long a hash server's link counts as impaired after its loss, duplication, reordering or
  // delay ends: TCP connections that lost segments wait out their retransmission timeouts (200 ms
  // doubling) and the relay's queue is dropped when it goes. A fault on another hash server waits
  // for this too, so no record is left without a copy that answers in time.
  std::chrono::milliseconds link_recovery{2000};
  bool ops = true;  // range moves, replica changes, drains
};

class Nemesis {
 public:
  Nemesis(NemesisCluster& cluster, NemesisOptions options);
  ~Nemesis();
  Nemesis(const Nemesis&) = delete;
  Nemesis& operator=(const Nemesis&) = delete;

  // Runs the lanes for `length`, then reverts every fault still on and waits (bounded) for the
  // cluster to settle. Throws only on a harness error (a fault that did not take effect is
  // logged, not thrown).
  void run(std::chrono::milliseconds length);

  const std::vector<FaultRecord>& log() const { return log_; }
  // Faults that took effect, by kind.
  std::array<uint64_t, kFaultKinds> counts() const;
  // One line per fault: "START_NS END_NS KIND TARGET ok|failed DETAIL -- EVIDENCE".
  void write_log(const std::string& path) const;
  // The windows file of the history checker (tools/nemesis/history_checker.h): for each fault,
  // the answers the design allows while it is on and for `slack` after, by rule.
  void write_windows(const std::string& path,
                     std::chrono::milliseconds slack = std::chrono::seconds(2)) const;

  class Lane;  // one lane's schedule and state (nemesis.cpp)

 private:
  NemesisCluster& cluster_;
  NemesisOptions options_;
  std::vector<FaultRecord> log_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace imhash::test
