#include "tools/udp_sim/udp_sockets.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/system/system_error.hpp>
#include <cerrno>
#include <cstring>

#include "common/runtime/options.h"

namespace imhash::sim {

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw boost::system::system_error(errno, boost::system::system_category(), what);
}

Endpoint to_endpoint(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    return Endpoint::v4(ntohl(in.sin_addr.s_addr), ntohs(in.sin_port));
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss);
  std::array<uint8_t, 16> a{};
  std::memcpy(a.data(), &in6.sin6_addr, 16);
  return Endpoint::v6(a, ntohs(in6.sin6_port)).unmapped();
}

}  // namespace

UdpSockets::UdpSockets(const std::string& host, uint16_t port, uint32_t count) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    const std::string msg = "--target: cannot resolve '" + host + "': " + gai_strerror(rc);
    if (rc == EAI_AGAIN || rc == EAI_FAIL || rc == EAI_MEMORY || rc == EAI_SYSTEM) {
      throw boost::system::system_error(
          make_error_code(boost::system::errc::resource_unavailable_try_again), msg);
    }
    throw UsageError(msg);
  }
  sockaddr_storage peer{};
  const socklen_t peer_len = res->ai_addrlen;
  std::memcpy(&peer, res->ai_addr, res->ai_addrlen);
  const int family = res->ai_family;
  freeaddrinfo(res);
  target_ = to_endpoint(peer);

  try {
    open_all(family, peer, peer_len, count);
  } catch (...) {
    for (int fd : fds_) close(fd);
    throw;
  }
}

void UdpSockets::open_all(int family, const sockaddr_storage& peer, socklen_t peer_len,
                          uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_errno("socket");
    fds_.push_back(fd);
    // Room for bursts (best effort: the kernel caps these at net.core.[rw]mem_max).
    const int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    // Each datagram carries its arrival time, so replies are timed from then (receive_time.h).
    const int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0) {
      throw_errno("setsockopt SO_TIMESTAMPNS");
    }
    if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), peer_len) != 0) {
      throw_errno("connect to " + target_.to_string());
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) throw_errno("getsockname");
    locals_.push_back(to_endpoint(local));
  }
}

UdpSockets::~UdpSockets() {
  for (int fd : fds_) close(fd);
}

}  // namespace imhash::sim
