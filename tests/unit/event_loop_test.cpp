#include "common/runtime/event_loop.h"

#include <doctest/doctest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <thread>

using imhash::run_event_loop;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// A chain of posts that keeps the loop busy for a while (so idle polling engages), then a timer
// that fires after the loop went quiet (so it must poll or sleep its way to it).
struct BusyThenQuiet {
  explicit BusyThenQuiet(asio::io_context& c) : ctx(c), timer(c) {}
  void step(int left) {
    ++handled;
    if (left > 0) {
      asio::post(ctx, [this, left] { step(left - 1); });
    } else {
      timer.expires_after(5ms);
      timer.async_wait([this](boost::system::error_code) { timer_fired = true; });
    }
  }
  asio::io_context& ctx;
  asio::steady_timer timer;
  int handled = 0;
  bool timer_fired = false;
};

}  // namespace

TEST_CASE("event_loop: every handler runs and the loop returns when the work is done") {
  for (const auto idle_poll : {0us, 200us, 100000us}) {
    asio::io_context ctx{1};
    BusyThenQuiet work(ctx);
    asio::post(ctx, [&work] { work.step(200000); });
    run_event_loop(ctx, idle_poll);
    CHECK(work.handled == 200001);
    CHECK(work.timer_fired);
    CHECK(ctx.stopped());
  }
}

TEST_CASE("event_loop: work posted from another thread is run, and stop() ends the loop") {
  for (const auto idle_poll : {0us, 200us, 100000us}) {
    asio::io_context ctx{1};
    auto guard = asio::make_work_guard(ctx);
    std::atomic<int> handled{0};
    std::thread loop([&] { run_event_loop(ctx, idle_poll); });
    for (int i = 0; i < 1000; ++i) asio::post(ctx, [&] { ++handled; });
    asio::post(ctx, [&] { ctx.stop(); });
    loop.join();  // returns: stop() ends the loop whether it was polling or asleep
    CHECK(handled.load() == 1000);
  }
}
