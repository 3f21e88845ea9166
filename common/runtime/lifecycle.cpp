#include "common/runtime/lifecycle.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>

#include "common/runtime/options.h"

namespace asio = boost::asio;

namespace imhash {

struct Lifecycle::State {
  explicit State(asio::io_context& ctx)
      : ready_timer(ctx),
        watchdog_timer(ctx),
        stop_signals(ctx, SIGINT, SIGTERM),
        reload_signal(ctx, SIGHUP) {}
  std::function<bool()> ready;
  asio::steady_timer ready_timer;
  asio::steady_timer watchdog_timer;
  asio::signal_set stop_signals;
  asio::signal_set reload_signal;
  std::chrono::microseconds watchdog{0};  // 0: no watchdog
  bool stopping = false;
};

namespace {

using State = Lifecycle::State;

void notify(const char* state) {
  const int r = sd_notify(0, state);
  if (r < 0) spdlog::warn("sd_notify {}: {}", state, std::strerror(-r));
}

void wait_ready(const std::shared_ptr<State>& s) {
  if (!s->ready || s->ready()) {
    notify("READY=1");
    return;
  }
  s->ready_timer.expires_after(std::chrono::milliseconds(100));
  s->ready_timer.async_wait([s](const boost::system::error_code& ec) {
    if (!ec && !s->stopping) wait_ready(s);
  });
}

void feed_watchdog(const std::shared_ptr<State>& s) {
  notify("WATCHDOG=1");
  s->watchdog_timer.expires_after(s->watchdog / 2);
  s->watchdog_timer.async_wait([s](const boost::system::error_code& ec) {
    if (!ec && !s->stopping) feed_watchdog(s);
  });
}

void wait_reload(const std::shared_ptr<State>& s) {
  s->reload_signal.async_wait([s](const boost::system::error_code& ec, int) {
    if (ec || s->stopping) return;
    reload_log_level();
    wait_reload(s);
  });
}

}  // namespace

Lifecycle::Lifecycle(asio::io_context& ctx, std::function<bool()> ready)
    : state_(std::make_shared<State>(ctx)) {
  const auto& s = state_;
  s->ready = std::move(ready);
  s->stop_signals.async_wait([s](const boost::system::error_code& ec, int) {
    if (ec) return;
    s->stopping = true;
    notify("STOPPING=1");
    boost::system::error_code ignored;
    s->ready_timer.cancel();
    s->watchdog_timer.cancel();
    s->reload_signal.cancel(ignored);
  });
  wait_reload(s);
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    s->watchdog = std::chrono::microseconds(usec);
    feed_watchdog(s);
  }
  wait_ready(s);
}

Lifecycle::~Lifecycle() {
  boost::system::error_code ignored;
  state_->stopping = true;
  state_->ready_timer.cancel();
  state_->watchdog_timer.cancel();
  state_->stop_signals.cancel(ignored);
  state_->reload_signal.cancel(ignored);
}

}  // namespace imhash
