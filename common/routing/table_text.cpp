#include "common/routing/table_text.h"

#include <algorithm>
#include <charconv>

#include "common/codec/enum_names.h"

namespace imhash {

const char* to_string(RoutingMode mode) {
  switch (mode) {
    case RoutingMode::kModulo:
      return "modulo";
    case RoutingMode::kRange:
      return "range";
    case RoutingMode::kRing:
      return "ring";
  }
  return "unknown";
}

std::optional<RoutingMode> parse_mode(std::string_view text) {
  return parse_name(text, kRoutingModes, to_string);
}

const char* to_string(ModuloHash hash) {
  switch (hash) {
    case ModuloHash::kMix:
      return "mix";
    case ModuloHash::kIdentity:
      return "identity";
  }
  return "unknown";
}

std::optional<ModuloHash> parse_modulo_hash(std::string_view text) {
  return parse_name(text, kModuloHashes, to_string);
}

bool is_valid_server_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxServerNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::optional<uint64_t> parse_decimal_id(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::pair<uint64_t, uint64_t>> parse_id_range(std::string_view text) {
  auto number = [](std::string_view s) -> std::optional<uint64_t> {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return value;
  };
  size_t dash = text.find('-');
  std::optional<uint64_t> lo = number(text.substr(0, dash));
  std::optional<uint64_t> hi = dash == std::string_view::npos ? lo : number(text.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return std::pair{*lo, *hi};
}

std::string format_id_range(uint64_t lo, uint64_t hi) {
  return std::to_string(lo) + "-" + std::to_string(hi);
}

std::string describe_range(const IdRange& range) {
  return format_id_range(range.lo, range.hi) + " (" + range.server + ")";
}

}  // namespace imhash
