// The routing table's words in text: the names of its modes and modulo hashes, the rule for server
// names, and ids and id ranges as imctl, the admin API and error sentences write them. Pure; any
// thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/routing/table.h"

namespace imhash {

inline constexpr std::array kRoutingModes{RoutingMode::kModulo, RoutingMode::kRange,
                                          RoutingMode::kRing};
inline constexpr std::array kModuloHashes{ModuloHash::kMix, ModuloHash::kIdentity};

const char* to_string(RoutingMode mode);  // "modulo", "range", "ring"
std::optional<RoutingMode> parse_mode(std::string_view text);
const char* to_string(ModuloHash hash);  // "mix", "identity"
std::optional<ModuloHash> parse_modulo_hash(std::string_view text);

// A server name: 1..kMaxServerNameLength characters of A-Z a-z 0-9 . _ -
bool is_valid_server_name(std::string_view name);
// That rule in words, for error sentences.
inline constexpr std::string_view kServerNameRule = "1 to 64 characters of A-Z a-z 0-9 . _ -";
static_assert(kMaxServerNameLength == 64, "kServerNameRule states the limit");

// An id as the admin API and imctl take it in text: 1 to 20 decimal digits, at most
// 18446744073709551615. nullopt otherwise (no sign, no spaces, no hex).
std::optional<uint64_t> parse_decimal_id(std::string_view text);
// "LO-HI" (inclusive, decimal) or a single "ID", as imctl's `assign 1-2000 hash4` writes it.
// nullopt if malformed or LO > HI.
std::optional<std::pair<uint64_t, uint64_t>> parse_id_range(std::string_view text);
std::string format_id_range(uint64_t lo, uint64_t hi);  // "LO-HI"
// A range for a sentence: "1-2000 (hash2)".
std::string describe_range(const IdRange& range);

}  // namespace imhash
