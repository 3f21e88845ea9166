#include "common/runtime/event_loop.h"

#include <sched.h>

namespace imhash {

void run_event_loop(boost::asio::io_context& ctx, std::chrono::microseconds idle_poll) {
  if (idle_poll.count() <= 0) {
    ctx.run();
    return;
  }
  using clock = std::chrono::steady_clock;
  // Poll only while the thread is busy at least half of the time (over the last millisecond): under
  // light load a poll would mostly find nothing, and on a small host the spinning thread then
  // stands in the way of the ones it shares a core with (tail latency, measured).
  constexpr auto kPeriod = std::chrono::milliseconds(1);
  auto period_start = clock::now();
  auto last_work = period_start;
  clock::duration busy{};  // time spent in polls that found work, this period
  bool hot = false;        // the last period was at least half busy
  while (!ctx.stopped()) {
    const auto t0 = clock::now();
    if (t0 - period_start >= kPeriod) {
      hot = busy * 2 >= t0 - period_start;
      busy = {};
      period_start = t0;
    }
    if (ctx.poll() != 0) {  // epoll with a zero timeout, then every ready handler
      last_work = clock::now();
      busy += last_work - t0;
      continue;
    }
    if (hot && t0 - last_work < idle_poll) {
      sched_yield();  // let any other runnable thread on this core go first
      continue;
    }
    ctx.run_one();  // sleep in epoll until the next event, as run() would
    last_work = clock::now();
  }
}

}  // namespace imhash
