#include "common/endpoint.h"

#include <arpa/inet.h>

namespace imhash {

Endpoint Endpoint::unmapped() const {
  if (family != 6) return *this;
  static constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0,    0,
                                                            0, 0, 0, 0, 0xff, 0xff};
  for (size_t i = 0; i < kMappedPrefix.size(); ++i) {
    if (addr[i] != kMappedPrefix[i]) return *this;
  }
  Endpoint e;
  e.family = 4;
  e.port = port;
  for (int i = 0; i < 4; ++i) e.addr[i] = addr[12 + i];
  return e;
}

std::string Endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  if (family == 4) {
    inet_ntop(AF_INET, addr.data(), buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port);
  }
  if (family == 6) {
    inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(port);
  }
  return "none";
}

std::string format_host_port(std::string_view host, uint16_t port) {
  std::string out;
  const bool v6 = host.find(':') != std::string_view::npos;
  out.reserve(host.size() + 8);
  if (v6) out += '[';
  out += host;
  if (v6) out += ']';
  out += ':';
  out += std::to_string(port);
  return out;
}

}  // namespace imhash
