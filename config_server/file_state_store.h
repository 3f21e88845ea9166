// FileStateStore: the config server's state (config_server/state_store.h) in one JSON file under
// --state-dir, replaced atomically (common/runtime/durable_file.h), so a crash or kill -9 at any
// instant leaves either the old state or the new one, never a torn file (docs/design.md §5). The
// embedded default: one config server, one machine.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <string>

#include "config_server/state_store.h"

namespace imhash {

class FileStateStore final : public StateStore {
 public:
  // Opens (creating the directory if needed) and loads the state; throws ConfigError when the
  // state file exists but cannot be read or is invalid: a config server must not start from a
  // state it does not understand.
  explicit FileStateStore(std::string dir);

  const std::string& path() const { return path_; }
  std::string describe() const override { return "file " + path_; }

 protected:
  std::string persist(const std::deque<HistoryEntry>& history, const HistoryEntry* added,
                      const std::vector<uint64_t>& dropped,
                      const std::vector<PendingPurge>& pending) override;

 private:
  const std::string dir_;
  const std::string path_;
};

}  // namespace imhash
