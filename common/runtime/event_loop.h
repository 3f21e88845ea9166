// run_event_loop: runs an io_context on the calling thread until it stops, optionally polling
// for a while before each sleep instead of blocking in epoll at once.
//
// Why: on a host whose processes talk to each other (a login server, its hash servers and the
// clients on a few cores, or any virtual machine where waking an idle vCPU is a trip through the
// hypervisor), the expensive part of a request is not the work but the wake-ups. Polling for a
// short window after the last event keeps the thread on its core, so the next datagram or reply
// is picked up without a wake-up. The poll yields the core between checks (sched_yield), so a
// thread sharing the core still runs; seastar's reactor does the same (--idle-poll-time-us).
// It polls only while the thread was busy at least half of the last millisecond: under light
// load it sleeps at once, as run() does. The cost is CPU: a busy thread that gets work more
// often than the window never sleeps.
//
// Call it on the thread that owns `ctx` (the one that would call ctx.run()).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>

namespace imhash {

void run_event_loop(boost::asio::io_context& ctx, std::chrono::microseconds idle_poll);

}  // namespace imhash
