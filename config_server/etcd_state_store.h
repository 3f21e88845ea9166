// EtcdStateStore: the config server's state (config_server/state_store.h) in etcd, under one
// prefix, shared by several config servers of which one leads (config_server/leadership.h):
//   PREFIX/version               the current version, decimal
//   PREFIX/history/VVVVVVVVVVVVVVVVVVVV   one history entry per version (20 digits, so keys sort
//                                by version), the JSON of the file store's entries
//   PREFIX/pending_purges        the pending purges, a JSON array
//   PREFIX/leader, PREFIX/members/NAME   the election's keys (leadership.h)
// Every write is one transaction that succeeds only if PREFIX/version is still as this store last
// read or wrote it and PREFIX/leader is still the key this config server created when it won the
// election (the fence). So two config servers can never issue the same version: a deposed leader's
// write fails its compare. A write whose answer was lost (no member answered: etcd electing a new
// leader after losing one, or unreachable) is sent again until `retry_for` has passed; the compare
// makes that safe, and when a resend fails its compare the store reads whether the version key
// holds what it wrote under its own leader key (the first send was applied) or not. A write that
// fails its compare, or whose outcome is still unknown at the end, makes the store refuse further
// writes and calls `on_lost`: the config server steps down and whoever leads next starts from
// what etcd holds.
//
// Not thread-safe: the config server's main thread only (its EtcdClient blocks).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "config_server/etcd_client.h"
#include "config_server/state_store.h"

namespace imhash {

// The keys under a prefix ("/imhash": "/imhash/version", ...).
struct EtcdKeys {
  explicit EtcdKeys(const std::string& prefix);
  std::string prefix;   // with a trailing '/'
  std::string version;  // PREFIX/version
  std::string history;  // PREFIX/history/ (each entry's key is this plus 20 digits)
  std::string pending;  // PREFIX/pending_purges
  std::string leader;   // PREFIX/leader
  std::string members;  // PREFIX/members/ (each config server's key is this plus its name)
  std::string history_key(uint64_t version) const;
};

class EtcdStateStore final : public StateStore {
 public:
  // Reads nothing yet (etcd may not be up): reload() loads.
  EtcdStateStore(EtcdClient& etcd, const std::string& prefix);

  // Reads the whole state at one revision; "" or what failed (unreachable, or a state it cannot
  // read, which it names). Clears the refusal after a lost write.
  std::string reload() override;
  std::string describe() const override;

  // Writes go through only while PREFIX/leader has this create revision (Leadership::fence());
  // 0: this config server does not lead, every write is refused.
  void set_fence(int64_t leader_create_revision) { fence_ = leader_create_revision; }
  int64_t fence() const { return fence_; }

  // How long a write whose answer was lost is sent again (0: once). The config server uses the
  // time its lease surely lasts, so that losing etcd's leader does not fail a table change.
  void set_retry_for(std::chrono::milliseconds d) { retry_for_ = d; }

  // Called once for each write that failed its compare or whose outcome is unknown (why, in
  // words). It must not destroy the store or call it back synchronously.
  std::function<void(const std::string& why)> on_lost;

  const EtcdKeys& keys() const { return keys_; }

 protected:
  std::string persist(const std::deque<HistoryEntry>& history, const HistoryEntry* added,
                      const std::vector<uint64_t>& dropped,
                      const std::vector<PendingPurge>& pending) override;

 private:
  bool applied_before(const std::vector<EtcdKv>& version, const std::vector<EtcdKv>& leader,
                      const HistoryEntry* added) const;

  EtcdClient& etcd_;
  const EtcdKeys keys_;
  int64_t fence_ = 0;
  std::chrono::milliseconds retry_for_{0};
  int64_t version_revision_ = 0;  // mod revision of PREFIX/version as last read or written
  bool loaded_ = false;
  std::string doubt_;  // why writes are refused until reload() ("" while they are not)
};

}  // namespace imhash
