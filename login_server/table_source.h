// TableSource: where a login server's routing comes from, and the RoutingState it hands to the
// workers: the current router, the previous one and the end of the grace period during which a
// lookup that misses at the new owner is retried at the old one (DESIGN §4). Tables come from a
// file (re-read on SIGHUP, or when a hash server answers MOVED with a newer version) or are pushed
// by the config server.
//
// Thread-safe: workers call latest()/refresh() from their threads (only on MOVED), the main thread
// installs pushed tables and handles SIGHUP.
#pragma once

#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/router.h"

namespace imhash {

// Immutable once built; shared by all workers.
struct RoutingState {
  // A table replaced less than a grace period ago: ids it placed elsewhere may still be found
  // there until their users write again (or a read repair copies them).
  struct Earlier {
    std::shared_ptr<const Router> router;
    int64_t grace_until_ns = 0;  // steady clock
  };
  static constexpr size_t kMaxEarlier = 4;

  std::shared_ptr<const Router> current;
  std::vector<Earlier> earlier;  // newest first

  uint64_t version() const { return current ? current->version() : 0; }
  // The latest end of a grace period (0: none).
  int64_t grace_until_ns() const { return earlier.empty() ? 0 : earlier.front().grace_until_ns; }
};

class TableSource {
 public:
  using Listener = std::function<void(std::shared_ptr<const RoutingState>)>;

  explicit TableSource(std::chrono::milliseconds grace) : grace_(grace) {}

  // File mode: loads `path` now; throws ConfigError when it is missing or invalid.
  void load_file(std::string path);
  // Push mode: installs a table from the config server when it is newer than the current one.
  // Returns true when it was installed.
  bool install(const Table& current, const std::optional<Table>& previous,
               std::chrono::milliseconds grace);

  std::shared_ptr<const RoutingState> latest() const;
  // A hash server said a newer version exists. File mode: re-read the file if it changed, and
  // return the new state when it is newer. Push mode: ask for it (`on_stale`) and return latest().
  std::shared_ptr<const RoutingState> refresh();
  void set_listener(Listener l);
  void set_on_stale(std::function<void()> f);

 private:
  // Installs under mu_ and returns the listener to call after unlocking.
  Listener install_locked(std::shared_ptr<const Router> next, std::shared_ptr<const Router> prev,
                          std::chrono::milliseconds grace);

  const std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  // Protected by mu_.
  std::string path_;
  timespec mtime_{};
  std::shared_ptr<const RoutingState> state_;
  Listener listener_;
  std::function<void()> on_stale_;
};

}  // namespace imhash
