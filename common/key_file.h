// Loading the authentication key (docs/design.md §6) from a file that holds it as hex (see
// parse_hex_key in common/token.h). Start-up only: throws ConfigError (exit kExitConfig) with a
// message naming the file and what is wrong. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace imhash {

std::vector<uint8_t> load_key_file(const std::string& path);

}  // namespace imhash
