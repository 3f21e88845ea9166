// ClientAddr: a client's UDP address as the kernel gave it (IPv4 or IPv6), small enough to keep
// with every request in flight. Plain value; any thread.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/codec/endpoint.h"

namespace imhash {

struct ClientAddr {
  union {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } u{};
  socklen_t len = 0;

  // The address as the protocol stores it; an IPv4-mapped IPv6 address becomes IPv4.
  Endpoint endpoint() const {
    if (u.sa.sa_family == AF_INET)
      return Endpoint::v4(ntohl(u.v4.sin_addr.s_addr), ntohs(u.v4.sin_port));
    std::array<uint8_t, 16> a{};
    std::copy(u.v6.sin6_addr.s6_addr, u.v6.sin6_addr.s6_addr + 16, a.begin());
    return Endpoint::v6(a, ntohs(u.v6.sin6_port)).unmapped();
  }
};

}  // namespace imhash
