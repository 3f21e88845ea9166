// StateStore: the config server's durable state — the current routing table, its version history
// and the automatic purges still pending (one per hash server) — kept in memory as last written or
// read, behind one interface with two homes (docs/design.md §5):
//   FileStateStore (config_server/file_state_store.h): one JSON file under --state-dir, the
//     embedded default for one config server on one machine;
//   EtcdStateStore (config_server/etcd_state_store.h): keys under one prefix in etcd, shared by
//     several config servers of which one leads.
// A change is durable in its home before commit() returns "", and nothing changes on failure.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/routing/table.h"
#include "config_server/pending_purge.h"

namespace imhash {

struct HistoryEntry {
  uint64_t version = 0;
  uint64_t time = 0;   // Unix seconds
  std::string change;  // what the operator (or failover) did, in words
  Table table;
};

class StateStore {
 public:
  static constexpr size_t kMaxHistory = 1000;

  virtual ~StateStore() = default;

  // The current table; nothing before the first server is added.
  const std::optional<Table>& current() const { return current_; }
  uint64_t version() const { return current_ ? current_->version : 0; }
  const std::deque<HistoryEntry>& history() const { return history_; }  // newest first
  // The table of `version`, if still in the history.
  const Table* at_version(uint64_t version) const;

  // The pending purges, in the order they were written.
  const std::vector<PendingPurge>& pending_purges() const { return pending_; }

  // Makes `next` (whose version must be version() + 1) current and `pending` the pending purges,
  // in one durable write before returning. Returns "" on success or what failed; on failure
  // nothing changes here (with etcd, a write whose answer was lost may still have been applied:
  // the store then refuses further writes until reload()).
  std::string commit(Table next, std::string change, std::vector<PendingPurge> pending);
  // Rewrites the pending purges alone (one was sent, or dropped); "" or what failed (then nothing
  // changes).
  std::string set_pending_purges(std::vector<PendingPurge> pending);

  // Reads the state again from its home ("" or what failed; then nothing changes): a standby that
  // takes over starts from what the store holds now. The file store, its own only writer, has
  // nothing new to read.
  virtual std::string reload() { return {}; }
  // "file PATH" or "etcd://HOST:PORT,…/PREFIX": for logs and status.
  virtual std::string describe() const = 0;

  // The JSON both homes keep a history entry and the pending purges in; the readers throw
  // ConfigError naming `where` for what they cannot take.
  static boost::json::value entry_json(const HistoryEntry& h);
  static HistoryEntry entry_of(const boost::json::value& v, const std::string& where);
  static boost::json::value pending_json(const std::vector<PendingPurge>& pending);
  static std::vector<PendingPurge> pending_of(const boost::json::value& v,
                                              const std::string& where);

 protected:
  // Writes the state durably: `history` is the whole history after the change (newest first),
  // `added` its new entry (null when only the pending purges change), `dropped` the versions that
  // fell off its end. "" or what failed.
  virtual std::string persist(const std::deque<HistoryEntry>& history, const HistoryEntry* added,
                              const std::vector<uint64_t>& dropped,
                              const std::vector<PendingPurge>& pending) = 0;
  // What a load read (newest first).
  void assign(std::deque<HistoryEntry> history, std::vector<PendingPurge> pending);

 private:
  std::optional<Table> current_;
  std::deque<HistoryEntry> history_;
  std::vector<PendingPurge> pending_;
};

}  // namespace imhash
