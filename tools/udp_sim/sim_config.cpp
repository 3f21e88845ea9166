#include "tools/udp_sim/sim_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace imhash::sim {

std::optional<Mix> parse_mix(std::string_view text, std::string& error) {
  Mix mix{0, 0, 0, 0};
  bool seen[4] = {false, false, false, false};
  for (bool more = true; more;) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) text = text.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      error = "expected NAME=WEIGHT, got '" + std::string(item) + "'";
      return std::nullopt;
    }
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    uint32_t weight = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), weight);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
        weight > 1'000'000) {
      error = "bad weight '" + std::string(value) + "' for " + std::string(name);
      return std::nullopt;
    }
    static constexpr std::string_view kNames[4] = {"login", "heartbeat", "lookup", "logout"};
    uint32_t* fields[4] = {&mix.login, &mix.heartbeat, &mix.lookup, &mix.logout};
    const auto* it = std::find(std::begin(kNames), std::end(kNames), name);
    if (it == std::end(kNames)) {
      error = "unknown operation '" + std::string(name) + "' (login, heartbeat, lookup, logout)";
      return std::nullopt;
    }
    const auto i = static_cast<size_t>(it - std::begin(kNames));
    if (seen[i]) {
      error = std::string(name) + " given twice";
      return std::nullopt;
    }
    seen[i] = true;
    *fields[i] = weight;
  }
  if (mix.total() == 0) {
    error = "every weight is 0";
    return std::nullopt;
  }
  return mix;
}

std::string to_string(const Mix& m) {
  return "login=" + std::to_string(m.login) + ",heartbeat=" + std::to_string(m.heartbeat) +
         ",lookup=" + std::to_string(m.lookup) + ",logout=" + std::to_string(m.logout);
}

uint32_t SimConfig::in_flight_capacity() const {
  if (!open_loop()) return window;
  const double life_s = timeout_ms / 1000.0 * (retries + 1) + 0.1;
  const double want = std::ceil(rate * life_s * 1.5);
  return static_cast<uint32_t>(std::clamp(want, 64.0, double{1u << 20}));
}

}  // namespace imhash::sim
