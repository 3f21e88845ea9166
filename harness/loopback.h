// Sockets on 127.0.0.1 for the tests' own clients, proxies and fake servers: the one place that
// fills in a loopback sockaddr. Plain functions; any thread.
#pragma once

#include <netinet/in.h>

#include <cstdint>

namespace imhash::test {

sockaddr_in loopback_address(uint16_t port);

// A socket of `type` (SOCK_STREAM or SOCK_DGRAM, with SOCK_CLOEXEC, SOCK_NONBLOCK... as wanted)
// connected to 127.0.0.1:port; -1 on failure, with nothing left open.
int connect_loopback(int type, uint16_t port);

// A socket of `type` bound to 127.0.0.1 on a free port, which goes to `port`; -1 on failure.
int bind_loopback(int type, uint16_t& port);

}  // namespace imhash::test
