#include "login_server/table_source.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "common/options.h"
#include "common/routing_table.h"

namespace imhash {

namespace {
timespec mtime_of(const std::string& path) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return {};
  return st.st_mtim;
}
bool same(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}
}  // namespace

TableSource::TableSource(std::string path) : path_(std::move(path)) {
  mtime_ = mtime_of(path_);
  auto loaded = load_table_file(path_);
  if (!loaded.table) throw ConfigError(loaded.error);
  router_ = Router::compile(std::move(*loaded.table));
}

std::shared_ptr<const Router> TableSource::latest() const {
  std::lock_guard lock(mu_);
  return router_;
}

void TableSource::set_listener(Listener l) {
  std::lock_guard lock(mu_);
  listener_ = std::move(l);
}

std::shared_ptr<const Router> TableSource::refresh() {
  std::unique_lock lock(mu_);
  const timespec now = mtime_of(path_);
  if (same(now, mtime_)) return router_;
  mtime_ = now;
  auto loaded = load_table_file(path_);
  if (!loaded.table) {
    spdlog::error("table file: {} (keeping version {})", loaded.error, router_->version());
    return router_;
  }
  if (loaded.table->version <= router_->version()) return router_;
  router_ = Router::compile(std::move(*loaded.table));
  spdlog::info("table version {} loaded from {}", router_->version(), path_);
  auto listener = listener_;
  auto router = router_;
  lock.unlock();
  if (listener) listener(router);
  return router;
}

}  // namespace imhash
