#include "common/key_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/options.h"
#include "common/token.h"

namespace imhash {

std::vector<uint8_t> load_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError("key file " + path + ": cannot open: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError("key file " + path + ": read error");
  std::string error;
  auto key = parse_hex_key(text.str(), error);
  if (!key) throw ConfigError("key file " + path + ": " + error);
  return std::move(*key);
}

}  // namespace imhash
