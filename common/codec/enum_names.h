// Enums that travel as words (routing modes, control-protocol roles, the purge vocabulary): each
// has one list of its values and one function naming a value, and parsing a word and the list of
// choices in an error sentence are derived from those two, so the words are written once.
// Pure; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace imhash {

// The value of `values` whose name is `text`; nullopt if none.
template <typename E, size_t N>
std::optional<E> parse_name(std::string_view text, const std::array<E, N>& values,
                            const char* (*name)(E)) {
  for (E v : values) {
    if (text == name(v)) return v;
  }
  return std::nullopt;
}

// The names of `values` for a sentence: "\"modulo\", \"range\" or \"ring\"".
template <typename E, size_t N>
std::string name_list(const std::array<E, N>& values, const char* (*name)(E)) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += '"';
    out += name(values[i]);
    out += '"';
  }
  return out;
}

}  // namespace imhash
