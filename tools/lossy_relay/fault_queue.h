// FaultQueue: what tc netem does to the packets of a link, without the link: each packet offered
// is lost, or queued for the time it is due — once, or twice when duplicated; after the delay (+-
// the jitter, which may reorder), or at once when picked for reordering (it overtakes the packets
// still delayed, as netem's "reorder" does). Each direction has its own counts; both share the
// bounds (packets and bytes waiting: beyond them a packet is counted as overflow and dropped).
//
// The core of lossy_relay (tools/lossy_relay/main.cpp: UDP datagrams; link_relay.cpp: the frames
// of a link between two interfaces): no socket, no clock — the time is passed in — and its
// randomness from a seeded generator, so a run with a seed is repeatable. One thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace imhash {

struct FaultParams {
  double loss = 0;       // probability (0..1) a packet is dropped
  double duplicate = 0;  // probability a packet kept is sent twice
  double reorder = 0;    // probability a packet kept goes at once instead of after the delay
  int64_t delay_ns = 0;
  int64_t jitter_ns = 0;  // the delay varies uniformly by +- this
  uint64_t seed = 0;
  std::size_t max_queued = 100000;    // packets waiting at most
  std::size_t max_bytes = 64u << 20;  // bytes waiting at most
};

struct FaultCounts {
  uint64_t received = 0;    // offered
  uint64_t lost = 0;        // dropped by the loss probability
  uint64_t duplicated = 0;  // sent a second time
  uint64_t reordered = 0;   // sent at once, ahead of delayed ones
  uint64_t overflow = 0;    // dropped: the queue was full
};

// What an adapter counts beside the queue, per direction: packets sent on, sends that failed, and
// packets whose destination went away while they waited.
struct SendCounts {
  uint64_t forwarded = 0, send_failed = 0, expired = 0;
};

// One direction's figures for a summary line: "received N forwarded N lost N duplicated N
// reordered N overflow N send_failed N expired N".
std::string describe(const FaultCounts& faults, const SendCounts& sends);

class FaultQueue {
 public:
  struct Packet {
    int64_t due_ns = 0;
    uint64_t seq = 0;  // ties in due time go in the order offered
    uint32_t dir = 0;  // 0 or 1
    uint64_t key = 0;  // whose it is (the adapter's: a client, an interface)
    std::vector<char> data;
  };

  explicit FaultQueue(const FaultParams& params);

  // Offers one packet of direction `dir` (0 or 1) at `now_ns`.
  void offer(uint32_t dir, uint64_t key, std::span<const char> data, int64_t now_ns);
  // When the earliest waiting packet is due (max() when none waits).
  int64_t next_due() const {
    return queue_.empty() ? std::numeric_limits<int64_t>::max() : queue_.front().due_ns;
  }
  // Takes the earliest packet due at `now_ns` into `out`; false when none is due.
  bool pop_due(int64_t now_ns, Packet& out);

  const FaultCounts& counts(uint32_t dir) const { return counts_[dir & 1]; }
  std::size_t waiting() const { return queue_.size(); }

 private:
  bool chance(double p) { return p > 0 && unit_(rng_) < p; }
  void push(uint32_t dir, uint64_t key, std::span<const char> data, int64_t due_ns);

  FaultParams p_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::vector<Packet> queue_;  // a heap, earliest due first
  std::size_t bytes_ = 0;
  uint64_t seq_ = 0;
  FaultCounts counts_[2];
};

}  // namespace imhash
