// UdpSockets: the non-blocking UDP sockets udp_sim sends from, each connect()ed to the target, so
// that it receives only the target's datagrams, learns of an ICMP "port unreachable" as
// ECONNREFUSED, and has a fixed local address (what the server stores under --observed). Several
// source ports let a server with SO_REUSEPORT spread the load over its threads. Each socket asks
// for kernel receive timestamps (SO_TIMESTAMPNS; see receive_time.h).
//
// Built in main() before the run (throws on failure: start-up only); then used by the driver's
// thread only.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/codec/endpoint.h"

namespace imhash::sim {

class UdpSockets {
 public:
  // Resolves `host` (the first address getaddrinfo gives). Throws UsageError when the name does not
  // resolve, boost::system::system_error when resolution or a socket call fails otherwise.
  UdpSockets(const std::string& host, uint16_t port, uint32_t count);
  ~UdpSockets();
  UdpSockets(const UdpSockets&) = delete;
  UdpSockets& operator=(const UdpSockets&) = delete;

  size_t size() const { return fds_.size(); }
  int fd(size_t i) const { return fds_[i]; }
  // The socket's own address as the kernel bound it (IPv4-mapped addresses unmapped).
  const Endpoint& local(size_t i) const { return locals_[i]; }
  const std::vector<Endpoint>& locals() const { return locals_; }
  const Endpoint& target() const { return target_; }

 private:
  void open_all(int family, const sockaddr_storage& peer, socklen_t peer_len, uint32_t count);

  std::vector<int> fds_;
  std::vector<Endpoint> locals_;
  Endpoint target_;
};

}  // namespace imhash::sim
