#include "tools/udp_sim/receive_time.h"

#include <doctest/doctest.h>

#include <cstring>
#include <ctime>
#include <vector>

using imhash::sim::kReceiveControlSize;
using imhash::sim::receive_time_ns;

namespace {

// A received message's header whose control buffer holds one cmsg of `type` carrying `t`.
struct Stamped {
  explicit Stamped(int type, timespec t) : control(kReceiveControlSize) {
    h.msg_control = control.data();
    h.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(sizeof t);
    std::memcpy(CMSG_DATA(c), &t, sizeof t);
  }
  std::vector<uint8_t> control;
  msghdr h{};
};

}  // namespace

TEST_CASE("receive_time: the kernel stamp on the monotonic clock, never after the read") {
  const int64_t offset = 1'700'000'000'000'000'000;  // realtime - monotonic
  Stamped s(SCM_TIMESTAMPNS, timespec{.tv_sec = 1'700'000'100, .tv_nsec = 250});
  // Stamped at monotonic 100 s + 250 ns; read 30 us later.
  CHECK(receive_time_ns(s.h, offset, 100'000'030'250) == 100'000'000'250);
  // A stamp after the read (clocks stepped between the two readings) is not believed.
  CHECK(receive_time_ns(s.h, offset, 99'000'000'000) == 99'000'000'000);
}

TEST_CASE("receive_time: without a timestamp the read time stands") {
  msghdr none{};
  CHECK(receive_time_ns(none, 0, 42) == 42);
  Stamped other(SCM_RIGHTS, timespec{.tv_sec = 1, .tv_nsec = 0});
  CHECK(receive_time_ns(other.h, 0, 42) == 42);
}
