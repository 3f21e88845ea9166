// Loading the authentication key (docs/design.md §6) from a file that holds it as hex (see
// parse_hex_key in common/security/token.h). Start-up only: throws ConfigError (exit kExitConfig)
// with a message naming the file and what is wrong. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace imhash {

// Refuses (ConfigError) a file that other users may read or write, or that its group may write:
// 0600, 0400, 0640 and 0440 are fine.
std::vector<uint8_t> load_key_file(const std::string& path);

// Why a key file with this st_mode is refused, or empty when it is fine.
std::string key_file_mode_problem(uint32_t mode);

}  // namespace imhash
