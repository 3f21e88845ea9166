// TableSource: where a login server's tables come from, and the RoutingState it hands to the
// workers (login_server/routing_state.h): the current router and the tables replaced less than a
// grace period ago, whose owners a lookup that misses is retried at (docs/design.md, "Changing the
// table"). Tables come from a file (re-read on SIGHUP, or when a worker met a hash server with a
// newer version) or are pushed by the config server.
//
// Thread rules: the main thread only (checked in debug builds). Workers never call it: a worker
// that needs a newer table says so, and the main thread calls refresh() (no file I/O or lock on a
// worker thread).
#pragma once

#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/codec/thread_check.h"
#include "common/routing/router.h"
#include "login_server/routing_state.h"

namespace imhash {

class TableSource {
 public:
  using Listener = std::function<void(std::shared_ptr<const RoutingState>)>;

  explicit TableSource(std::chrono::milliseconds grace) : grace_(grace) {}

  // File mode: loads `path` now; throws ConfigError when it is missing or invalid.
  void load_file(std::string path);
  // Push mode: installs a table from the config server when it is newer than the current one.
  // Returns true when it was installed. The version it runs, pushed again, extends the grace
  // periods of the tables it replaced that have not ended (to `grace` from now): the config
  // server does that while the version's streams run.
  bool install(const Table& current, const std::optional<Table>& previous,
               std::chrono::milliseconds grace);

  std::shared_ptr<const RoutingState> latest() const;
  // Somebody met table `version`, newer than ours (a hash server answered MOVED), or an operator
  // sent SIGHUP (version 0). File mode: re-read the file if it changed and install it if newer.
  // Push mode: ask for it (`on_stale`).
  void refresh(uint64_t version = 0);
  // Called with every table installed.
  void set_listener(Listener l);
  void set_on_stale(std::function<void(uint64_t version)> f);

 private:
  void extend_grace(std::chrono::milliseconds grace);
  void install_router(std::shared_ptr<const Router> next, std::shared_ptr<const Router> prev,
                      std::chrono::milliseconds grace);

  const std::chrono::milliseconds grace_;
  ThreadCheck thread_;
  std::string path_;
  timespec mtime_{};
  std::shared_ptr<const RoutingState> state_;
  Listener listener_;
  std::function<void(uint64_t version)> on_stale_;
};

}  // namespace imhash
