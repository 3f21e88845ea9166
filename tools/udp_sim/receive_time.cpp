#include "tools/udp_sim/receive_time.h"

#include <algorithm>
#include <cstring>
#include <ctime>

namespace imhash::sim {

int64_t receive_time_ns(const msghdr& h, int64_t realtime_minus_monotonic_ns, int64_t read_at_ns) {
  // CMSG_NXTHDR takes a non-const msghdr; it only reads it.
  auto& m = const_cast<msghdr&>(h);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    if (c->cmsg_len < CMSG_LEN(sizeof(timespec))) break;
    timespec t;
    std::memcpy(&t, CMSG_DATA(c), sizeof t);
    const int64_t stamped = int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
    return std::min(read_at_ns, stamped - realtime_minus_monotonic_ns);
  }
  return read_at_ns;
}

}  // namespace imhash::sim
