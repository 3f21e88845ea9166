#include "common/runtime/defects.h"

#include <cstdlib>
#include <string_view>

#include "common/runtime/options.h"

namespace imhash {

Defects defects_from_environment() {
  Defects d;
  const char* env = std::getenv("IMHASH_DEFECTS");
  std::string_view rest = env ? env : "";
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (name == "no-hints") {
      d.no_hints = true;
    } else if (name == "no-tombstones") {
      d.no_tombstones = true;
    } else if (!name.empty()) {
      throw UsageError("IMHASH_DEFECTS: unknown defect '" + std::string(name) +
                       "' (no-hints, no-tombstones)");
    }
  }
  return d;
}

std::string to_string(const Defects& d) {
  std::string out;
  if (d.no_hints) out += "no-hints";
  if (d.no_tombstones) out += std::string(out.empty() ? "" : ",") + "no-tombstones";
  return out;
}

}  // namespace imhash
