#include "common/endpoint.h"

#include <arpa/inet.h>

#include <charconv>

namespace imhash {

std::string format_host_port(std::string_view host, uint16_t port) {
  const bool bracket = host.find(':') != std::string_view::npos;
  std::string out;
  out.reserve(host.size() + 8);
  if (bracket) out += '[';
  out += host;
  if (bracket) out += ']';
  out += ':';
  out += std::to_string(port);
  return out;
}

std::optional<uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(value);
}

std::string check_host_port(std::string_view address) {
  if (address.empty()) return "is empty";
  if (address.size() > 255) return "is longer than 255 characters";
  for (char c : address) {
    if (c <= ' ' || c > '~') return "contains a space, a control or a non-ASCII character";
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return "is not HOST:PORT";
  const std::optional<uint16_t> port = parse_port(address.substr(colon + 1));
  if (!port || *port == 0) return "does not end in a port between 1 and 65535";
  return {};
}

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
  if (!valid()) return "none";
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(family == 6 ? AF_INET6 : AF_INET, addr.data(), buf, sizeof buf);
  return format_host_port(buf, port);
}

}  // namespace imhash
