// StateStore: the config server's durable state — the current routing table, its version history
// and the automatic purges still pending (one per hash server) — in one JSON file under
// --state-dir, replaced atomically (common/durable_file.h), so a crash or kill -9 at any instant
// leaves either the old state or the new one, never a torn file (docs/design.md §5).
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/table.h"

namespace imhash {

struct HistoryEntry {
  uint64_t version = 0;
  uint64_t time = 0;   // Unix seconds
  std::string change;  // what the operator (or failover) did, in words
  Table table;
};

// An automatic purge of the old copies a hash server holds after table `version` moved ids away
// from it (docs/operations.md, "The pending purge"). It is sent once the grace period has passed
// (`not_before_ms`, wall-clock Unix milliseconds, so it survives a restart), every node that is up
// runs `version`, and the server's stream is done at `version` or later.
struct PendingPurge {
  std::string server;
  uint64_t version = 0;
  uint64_t not_before_ms = 0;
  // The server was up when the change was made and was told to stream what it holds: if it is no
  // longer in the table when it comes back (re-registers, or heartbeats again after DOWN), it
  // streams again rather than purging everything (a server removed while DOWN purges all).
  bool streams = false;
  friend bool operator==(const PendingPurge&, const PendingPurge&) = default;
};

class StateStore {
 public:
  static constexpr size_t kMaxHistory = 1000;

  // Opens (creating the directory if needed) and loads the state; throws ConfigError when the
  // state file exists but cannot be read or is invalid: a config server must not start from a
  // state it does not understand.
  explicit StateStore(std::string dir);

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
  // nothing changes.
  std::string commit(Table next, std::string change, std::vector<PendingPurge> pending);
  // Rewrites the pending purges alone (one was sent, or dropped); "" or what failed (then nothing
  // changes).
  std::string set_pending_purges(std::vector<PendingPurge> pending);

  const std::string& path() const { return path_; }

 private:
  const std::string dir_;
  const std::string path_;
  std::optional<Table> current_;
  std::deque<HistoryEntry> history_;
  std::vector<PendingPurge> pending_;

  std::string write(const std::deque<HistoryEntry>& history,
                    const std::vector<PendingPurge>& pending);
};

}  // namespace imhash
