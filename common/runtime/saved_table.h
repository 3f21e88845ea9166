// SavedTable: the last routing table a hash or login server ran, kept in its --state-dir as
// DIR/ROLE-NAME.table.json, e.g. /var/lib/imhash/hash-hash1.table.json (the table file format of
// common/routing/table_json.h, so it can also be given to --table). The name in the file name lets
// several daemons of one host share the directory (the shipped config files all say
// /var/lib/imhash, where the config server keeps its state.json). Kept so that a node restarted
// while the config server is down serves the table it had instead of none (docs/operations.md §2).
// Written durably (common/runtime/durable_file.h) each time a newer version is installed; read once
// at start.
//
// The file is a copy, not the source of truth: a missing or unreadable one is logged and ignored
// (the config server brings the table), never a reason not to start.
//
// Not thread-safe: the node's main thread only (the one that installs tables).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/routing/table.h"

namespace imhash {

class SavedTable {
 public:
  // The file's name for the daemon `role` ("hash" or "login") called `name`.
  static std::string file_name(const std::string& role, const std::string& name);

  // Makes `dir` if missing; throws ConfigError if it cannot.
  SavedTable(std::string dir, const std::string& role, const std::string& name);

  // The saved table, or nothing (no file yet, or an invalid one: logged).
  std::optional<Table> load();
  // Writes `table` if it is newer than what was saved (or loaded) before; a failure is logged and
  // the node runs on (it is saved again with the next version).
  void save(const Table& table);

  uint64_t version() const { return version_; }  // of the table on disk, 0 if none
  const std::string& path() const { return path_; }

 private:
  const std::string dir_;
  const std::string file_;
  const std::string path_;
  uint64_t version_ = 0;
};

// The newer of two starting tables (a --table file and the saved one); the first on a tie.
std::optional<Table> newer_table(std::optional<Table> a, std::optional<Table> b);

}  // namespace imhash
