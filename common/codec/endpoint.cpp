#include "common/codec/endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
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

const char* unreachable_endpoint_reason(const Endpoint& e) {
  if (!e.valid()) return "no address family";
  if (e.port == 0) return "port 0";
  const auto end = e.addr.begin() + static_cast<std::ptrdiff_t>(e.addr_len());
  if (std::all_of(e.addr.begin(), end, [](uint8_t b) { return b == 0; })) {
    return "unspecified address";
  }
  if (e.family == 4) {
    if ((e.addr[0] & 0xf0) == 0xe0) return "multicast address";
    if (e.v4_host_order() == 0xffffffffu) return "broadcast address";
  } else if (e.addr[0] == 0xff) {
    return "multicast address";
  }
  return nullptr;
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

std::optional<Endpoint> parse_endpoint(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<uint16_t> port = parse_port(text.substr(colon + 1));
  std::string_view host = text.substr(0, colon);
  const bool v6 = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (v6) host = host.substr(1, host.size() - 2);
  // A copy on the stack for inet_pton's C string: a history checker reads millions of these.
  char buf[INET6_ADDRSTRLEN];
  if (!port || host.empty() || host.size() >= sizeof buf) return std::nullopt;
  host.copy(buf, host.size());
  buf[host.size()] = '\0';
  std::array<uint8_t, 16> addr{};
  if (inet_pton(v6 ? AF_INET6 : AF_INET, buf, addr.data()) != 1) return std::nullopt;
  if (v6) return Endpoint::v6(addr, *port);
  Endpoint e;
  e.family = 4;
  e.port = *port;
  e.addr = addr;  // inet_pton wrote the first 4 bytes; the rest stay zero
  return e;
}

bool is_unspecified_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host.size() >= INET6_ADDRSTRLEN) return false;
  const std::string text(host);
  in_addr v4{};
  // inet_aton, not inet_pton: it reads "0" and "0.0" as 0.0.0.0, as getaddrinfo does.
  if (inet_aton(text.c_str(), &v4) != 0) return v4.s_addr == 0;
  std::array<uint8_t, 16> v6{};
  if (inet_pton(AF_INET6, text.c_str(), v6.data()) != 1) return false;  // a name, not a literal
  const Endpoint e = Endpoint::v6(v6, 0).unmapped();
  for (size_t i = 0; i < e.addr_len(); ++i) {
    if (e.addr[i] != 0) return false;
  }
  return true;
}

bool is_unspecified_address(std::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  return colon != std::string_view::npos && is_unspecified_host(host_port.substr(0, colon));
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host.size() >= INET6_ADDRSTRLEN) return false;
  const std::string text(host);
  std::array<uint8_t, 4> v4{};
  if (inet_pton(AF_INET, text.c_str(), v4.data()) == 1) return v4[0] == 127;
  std::array<uint8_t, 16> v6{};
  if (inet_pton(AF_INET6, text.c_str(), v6.data()) != 1) return false;
  const Endpoint e = Endpoint::v6(v6, 0).unmapped();
  if (e.family == 4) return e.addr[0] == 127;
  static constexpr std::array<uint8_t, 16> kLoopback6{0, 0, 0, 0, 0, 0, 0, 0,
                                                      0, 0, 0, 0, 0, 0, 0, 1};
  return std::equal(kLoopback6.begin(), kLoopback6.end(), e.addr.begin());
}

}  // namespace imhash
