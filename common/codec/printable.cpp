#include "common/codec/printable.h"

#include <algorithm>
#include <cstdio>

namespace imhash {

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(text.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x20 && u < 0x7f) {
      out += text[i];
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

std::string quoted_value(std::string_view text) { return "\"" + printable(text, 64) + "\""; }

}  // namespace imhash
