// TableSource: where a login server gets newer routing tables. For now a table file, re-read when
// it changes (on SIGHUP, or when a hash server answers MOVED with a newer version); the config
// server link will be another source. Thread-safe: workers call latest()/refresh() from their
// threads (rarely: only on MOVED), the main thread on SIGHUP.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/router.h"

namespace imhash {

class TableSource {
 public:
  using Listener = std::function<void(std::shared_ptr<const Router>)>;

  // Loads `path` now; throws ConfigError when it is missing or invalid.
  explicit TableSource(std::string path);

  std::shared_ptr<const Router> latest() const;
  // Re-reads the file if it changed; when it holds a newer version, installs it, tells the
  // listener, and returns it. Returns latest() otherwise. A bad file is logged and ignored.
  std::shared_ptr<const Router> refresh();
  void set_listener(Listener l);

 private:
  const std::string path_;
  mutable std::mutex mu_;
  // Protected by mu_.
  std::shared_ptr<const Router> router_;
  timespec mtime_{};
  Listener listener_;
};

}  // namespace imhash
