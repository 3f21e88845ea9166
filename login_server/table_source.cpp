#include "login_server/table_source.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "common/options.h"
#include "common/routing_table.h"

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
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void TableSource::load_file(std::string path) {
  auto loaded = load_table_file(path);
  if (!loaded.table) throw ConfigError(loaded.error);
  std::lock_guard lock(mu_);
  path_ = std::move(path);
  mtime_ = mtime_of(path_);
  auto st = std::make_shared<RoutingState>();
  st->current = Router::compile(std::move(*loaded.table));
  state_ = std::move(st);
}

std::shared_ptr<const RoutingState> TableSource::latest() const {
  std::lock_guard lock(mu_);
  return state_;
}

void TableSource::set_listener(Listener l) {
  std::lock_guard lock(mu_);
  listener_ = std::move(l);
}

void TableSource::set_on_stale(std::function<void()> f) {
  std::lock_guard lock(mu_);
  on_stale_ = std::move(f);
}

TableSource::Listener TableSource::install_locked(std::shared_ptr<const Router> next,
                                                  std::shared_ptr<const Router> prev,
                                                  std::chrono::milliseconds grace) {
  auto st = std::make_shared<RoutingState>();
  st->current = std::move(next);
  const int64_t now = steady_ns();
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
  return listener_;
}

bool TableSource::install(const Table& current, const std::optional<Table>& previous,
                          std::chrono::milliseconds grace) {
  std::unique_lock lock(mu_);
  if (state_ && current.version <= state_->version()) return false;
  // The table to read from during the grace period: ours (which the earlier ones follow), or the
  // one pushed with it when we missed versions in between.
  std::shared_ptr<const Router> prev;
  if (state_ && (!previous || previous->version == state_->version())) {
    prev = state_->current;
  } else if (previous) {
    prev = Router::compile(*previous);
  }
  auto listener = install_locked(Router::compile(current), std::move(prev), grace);
  auto st = state_;
  lock.unlock();
  if (listener) listener(st);
  return true;
}

std::shared_ptr<const RoutingState> TableSource::refresh() {
  std::unique_lock lock(mu_);
  if (path_.empty()) {
    auto ask = on_stale_;
    auto st = state_;
    lock.unlock();
    if (ask) ask();
    return st;
  }
  const timespec now = mtime_of(path_);
  if (same(now, mtime_)) return state_;
  mtime_ = now;
  auto loaded = load_table_file(path_);
  if (!loaded.table) {
    spdlog::error("table file: {} (keeping version {})", loaded.error, state_->version());
    return state_;
  }
  if (loaded.table->version <= state_->version()) return state_;
  auto listener =
      install_locked(Router::compile(std::move(*loaded.table)), state_->current, grace_);
  auto st = state_;
  lock.unlock();
  if (listener) listener(st);
  return st;
}

}  // namespace imhash
