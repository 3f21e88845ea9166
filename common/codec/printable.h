// Text from the input made safe and short for an error sentence or a log line. Pure; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace imhash {

// Printable ASCII is kept, other bytes become \xNN, and more than `max_bytes` input bytes are cut
// with "...".
std::string printable(std::string_view text, size_t max_bytes = 80);

// printable(text, 64) in double quotes: how error sentences quote a value back. (Not named
// `quoted`: std::quoted, found by argument-dependent lookup for a std::string, would win.)
std::string quoted_value(std::string_view text);

// A duration for an operator: "850 ms" under a second, else seconds with one decimal ("12.3 s").
inline std::string format_ms(uint64_t ms) {
  if (ms < 1000) return std::to_string(ms) + " ms";
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

}  // namespace imhash
