// Endpoint: an IPv4 or IPv6 address and a port, as the protocols carry it, and the one way every
// program writes an address as text (format_host_port), reads back an Endpoint's text
// (parse_endpoint) and checks the HOST:PORT text a routing table holds (check_host_port). A plain
// value type and pure functions; any thread may use them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace imhash {

// "HOST:PORT", with an IPv6 literal (a host containing ':') in brackets: "[::1]:7001".
std::string format_host_port(std::string_view host, uint16_t port);

// A decimal port 0..65535 and nothing else (no sign, no space); nullopt otherwise.
std::optional<uint16_t> parse_port(std::string_view text);

// "" if `address` is HOST:PORT as a routing table holds it: at most 255 characters of printable
// ASCII without space, at least one before the last ':', then a port 1..65535. Otherwise what is
// wrong, worded to follow the address in a sentence ("is not HOST:PORT"). An empty address is
// "is empty"; callers that allow it check for it first.
std::string check_host_port(std::string_view address);

struct Endpoint {
  uint8_t family = 0;  // 4 or 6; 0 means "none"
  uint16_t port = 0;
  std::array<uint8_t, 16> addr{};  // IPv4 uses the first 4 bytes, the rest stay zero

  static Endpoint v4(uint32_t host_order_addr, uint16_t port) {
    Endpoint e;
    e.family = 4;
    e.port = port;
    e.addr[0] = static_cast<uint8_t>(host_order_addr >> 24);
    e.addr[1] = static_cast<uint8_t>(host_order_addr >> 16);
    e.addr[2] = static_cast<uint8_t>(host_order_addr >> 8);
    e.addr[3] = static_cast<uint8_t>(host_order_addr);
    return e;
  }
  static Endpoint v6(const std::array<uint8_t, 16>& a, uint16_t port) {
    Endpoint e;
    e.family = 6;
    e.port = port;
    e.addr = a;
    return e;
  }
  bool valid() const { return family == 4 || family == 6; }
  // Bytes of address on the wire: 4 or 16.
  size_t addr_len() const { return family == 6 ? 16 : 4; }
  uint32_t v4_host_order() const {
    return uint32_t{addr[0]} << 24 | uint32_t{addr[1]} << 16 | uint32_t{addr[2]} << 8 | addr[3];
  }
  // An IPv4 address seen through a dual-stack socket (::ffff:a.b.c.d) becomes family 4.
  Endpoint unmapped() const;
  // "1.2.3.4:80" or "[::1]:80".
  std::string to_string() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// The Endpoint that Endpoint::to_string() wrote as `text`: "1.2.3.4:80" (a dotted quad) or
// "[2001:db8::1]:443" (any IPv6 literal inet_pton reads, without a zone), then a port 0..65535.
// Only literals: a name ("localhost:80") or anything else is nullopt. Text that is not canonical
// ("[0::1]:80") is read too, so to_string() may give back other text for the same Endpoint.
std::optional<Endpoint> parse_endpoint(std::string_view text);

// Why `e` cannot be stored as where a user is, or nullptr when it can: a client can be reached
// only at a unicast address and a real port, so port 0, unspecified (0.0.0.0, ::), multicast
// (224.0.0.0/4, ff00::/8) and the IPv4 broadcast address are refused (BAD_REQUEST).
const char* unreachable_endpoint_reason(const Endpoint& e);

// True if `host` is an unspecified address: 0.0.0.0 (in any form the resolver reads as it, e.g.
// "0"), :: or ::ffff:0.0.0.0, IPv6 with or without brackets. A listener may bind one to mean "every
// address here", but it is no address to give others: a login server dialling it reaches itself.
bool is_unspecified_host(std::string_view host);
// The same for the host part of "HOST:PORT" (everything before the last ':').
bool is_unspecified_address(std::string_view host_port);
// True if `host` is a loopback address literal (127.0.0.0/8, ::1, ::ffff:127.x.y.z, brackets or
// not) or "localhost": what only processes on this machine can reach. Any other name is not known
// to be loopback (it may resolve anywhere).
bool is_loopback_host(std::string_view host);

}  // namespace imhash
