// TakeoverHold: what a config server that has just become the leader holds back (docs/design.md
// §5, "Several config servers"). The nodes find the new leader within their reconnect back-off
// and a DOWN window; until then ("settling") a table change would miss the ones not back yet, and
// a pending purge must not go out because the nodes it waits for are merely unknown here.
//
// And the version found in the store may have reached no node: the dying leader committed it and
// was killed before pushing it. Pushed to each node as it registers, it would reach them up to a
// back-off apart, and a hash server on it would answer MOVED to login servers still on the one
// before. So while settling, a node that runs an older table keeps it, until the settle window
// ends or some node shows the version is out already; then it goes to every node at once, as a
// table change does. A node with no table gets it at once.
//
// A core (config_server/node_registry.h says what that means): times come in as steady-clock
// nanoseconds. Not thread-safe: the config server's main thread only.
#pragma once

#include <cstdint>

namespace imhash::cluster {

class TakeoverHold {
 public:
  // The settle window: at least this long, and at least the DOWN window.
  static constexpr int64_t kSettleNs = 2'500'000'000;

  // Leading from now on, with `version` the latest in the store (0: no table yet, so nobody to
  // wait for).
  void on_lead(uint64_t version, int64_t now_ns, int64_t down_after_ns);
  // Standing by: nothing is held.
  void clear() { *this = TakeoverHold{}; }

  // How long (ns) table changes and automatic purges still wait (0: they do not).
  int64_t settling_left(int64_t now_ns) const;
  // Whether a node that runs `node_version` keeps it instead of getting `latest` pushed.
  bool holds_push(uint64_t node_version, uint64_t latest) const;
  // A node registered with, or heartbeats, `node_version`: true if that shows `latest` is out and
  // so releases the held version now (the caller pushes it to every node behind).
  bool on_node_runs(uint64_t node_version, uint64_t latest);
  // A tick: true if the settle window has just ended with the version still held (released now).
  bool on_tick(int64_t now_ns);
  bool holding() const { return holding_; }

 private:
  int64_t settle_until_ns_ = 0;  // 0: not settling
  bool holding_ = false;
};

}  // namespace imhash::cluster
