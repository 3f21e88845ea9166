#include "login_server/table_source.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "common/routing/routing_table.h"
#include "common/runtime/clock.h"
#include "common/runtime/options.h"

namespace imhash {

namespace {
timespec mtime_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return st.st_mtim;
}
bool same(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}
}  // namespace

void TableSource::load_file(std::string path) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  auto loaded = load_table_file(path);
  if (!loaded.table) throw ConfigError(loaded.error);
  path_ = std::move(path);
  mtime_ = mtime_of(path_);
  auto st = std::make_shared<RoutingState>();
  st->current = Router::compile(std::move(*loaded.table));
  state_ = std::move(st);
}

std::shared_ptr<const RoutingState> TableSource::latest() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return state_;
}

void TableSource::set_listener(Listener l) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  listener_ = std::move(l);
}

void TableSource::set_on_stale(std::function<void(uint64_t version)> f) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  on_stale_ = std::move(f);
}

void TableSource::install_router(std::shared_ptr<const Router> next,
                                 std::shared_ptr<const Router> prev,
                                 std::chrono::milliseconds grace) {
  auto st = std::make_shared<RoutingState>();
  st->current = std::move(next);
  const int64_t now = monotonic_ns();
  if (prev) st->earlier.push_back({std::move(prev), now + std::chrono::nanoseconds(grace).count()});
  // Tables replaced earlier keep their own grace periods: several quick changes in a row must not
  // cut short the fallback reads of the first one.
  if (state_) {
    for (const auto& e : state_->earlier) {
      if (e.grace_until_ns > now && st->earlier.size() < RoutingState::kMaxEarlier &&
          e.router->version() < st->earlier.front().router->version()) {
        st->earlier.push_back(e);
      }
    }
  }
  state_ = std::move(st);
  spdlog::info("table version {} installed ({} mode, {} hash servers)", state_->version(),
               to_string(state_->current->mode()), state_->current->table().servers.size());
  if (listener_) listener_(state_);
}

bool TableSource::install(const Table& current, const std::optional<Table>& previous,
                          std::chrono::milliseconds grace) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (state_ && current.version == state_->version()) {
    extend_grace(grace);
    return false;
  }
  if (state_ && current.version < state_->version()) return false;
  // The table to read from during the grace period: ours (which the earlier ones follow), or the
  // one pushed with it when we missed versions in between.
  std::shared_ptr<const Router> prev;
  if (state_ && (!previous || previous->version == state_->version())) {
    prev = state_->current;
  } else if (previous) {
    prev = Router::compile(*previous);
  }
  install_router(Router::compile(current), std::move(prev), grace);
  return true;
}

void TableSource::extend_grace(std::chrono::milliseconds grace) {
  const int64_t now = monotonic_ns();
  auto st = state_->with_grace_until(now, now + std::chrono::nanoseconds(grace).count());
  if (!st) return;
  state_ = std::move(st);
  spdlog::debug("table version {}: grace period extended (its streams still run)",
                state_->version());
  if (listener_) listener_(state_);
}

void TableSource::refresh(uint64_t version) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (state_ && version != 0 && version <= state_->version()) return;  // already have it
  if (path_.empty()) {
    if (on_stale_) on_stale_(version);
    return;
  }
  const timespec now = mtime_of(path_);
  if (same(now, mtime_)) return;
  mtime_ = now;
  auto loaded = load_table_file(path_);
  if (!loaded.table) {
    spdlog::error("table file: {} (keeping version {})", loaded.error,
                  state_ ? state_->version() : 0);
    return;
  }
  if (state_ && loaded.table->version <= state_->version()) return;
  install_router(Router::compile(std::move(*loaded.table)), state_ ? state_->current : nullptr,
                 grace_);
}

}  // namespace imhash
