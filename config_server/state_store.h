// StateStore: the config server's durable state — the current routing table and its version
// history — in one JSON file under --state-dir, replaced atomically (write a temporary file, fsync
// it, rename it over the old one, fsync the directory), so a crash or kill -9 at any instant leaves
// either the old state or the new one, never a torn file (docs/design.md §5).
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "common/table.h"

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

  // Makes `next` (whose version must be version() + 1) current and writes it durably before
  // returning. Returns "" on success or what failed; on failure nothing changes.
  std::string commit(Table next, std::string change);

  const std::string& path() const { return path_; }

 private:
  std::string write_file(const std::string& text) const;

  const std::string dir_;
  const std::string path_;
  std::optional<Table> current_;
  std::deque<HistoryEntry> history_;
};

}  // namespace imhash
