// When a datagram reached this host, from the kernel's receive timestamp (SO_TIMESTAMPNS).
//
// Why: udp_sim times a reply from its arrival, not from when its thread got round to reading it.
// A thread sleeping in ppoll wakes some tens of microseconds after the datagram lands (on the
// development VM ~30 us at p50), and that is the load generator's delay, not the server's.
//
// The kernel stamps CLOCK_REALTIME; udp_sim counts on CLOCK_MONOTONIC. The caller reads both
// clocks once per receive batch and passes their difference. Pure function; any thread.
#pragma once

#include <sys/socket.h>

#include <cstdint>

namespace imhash::sim {

// Control-buffer room for one SCM_TIMESTAMPNS message per datagram.
inline constexpr size_t kReceiveControlSize = CMSG_SPACE(sizeof(struct timespec));

// The arrival time of the datagram `h` describes, on the monotonic clock: its SCM_TIMESTAMPNS
// stamp minus `realtime_minus_monotonic_ns`, never later than `read_at_ns` (the monotonic time the
// batch was read, also the answer when there is no stamp).
int64_t receive_time_ns(const msghdr& h, int64_t realtime_minus_monotonic_ns, int64_t read_at_ns);

}  // namespace imhash::sim
