// Lifecycle: what every daemon does alike once it serves, in one object made right after its last
// "listening on" line:
//  - tells its service manager READY=1 (sd_notify(3); systemd's Type=notify) as soon as `ready`
//    holds: at once, or, for a login server still waiting for a routing table, when one arrives;
//  - feeds the watchdog (WATCHDOG=1 every half WatchdogSec, when the unit sets one) from a timer
//    on `ctx`, so a stuck control thread gets the daemon restarted;
//  - says STOPPING=1 on SIGTERM/SIGINT and then cancels everything it waits on, so ctx.run() can
//    return once the daemon itself has stopped;
//  - re-reads the log level from --config-file on SIGHUP (reload_log_level()).
// Without $NOTIFY_SOCKET (not under systemd) the notifications are no-ops. Asio hands a signal to
// every signal_set registered for it, so the daemon's own SIGTERM and SIGHUP handling is untouched.
//
// Thread rules: construct on the thread that runs `ctx`, before it runs it; everything then runs on
// that thread. Destroy it after ctx.run() has returned (or with `ctx` not running).
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>

namespace imhash {

class Lifecycle {
 public:
  // `ready` (none: ready now) is checked now and then every 100 ms until it holds.
  explicit Lifecycle(boost::asio::io_context& ctx, std::function<bool()> ready = {});
  ~Lifecycle();
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  struct State;  // shared with the pending handlers

 private:
  std::shared_ptr<State> state_;
};

}  // namespace imhash
