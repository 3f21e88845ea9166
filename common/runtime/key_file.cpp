#include "common/runtime/key_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/runtime/options.h"
#include "common/security/token.h"

namespace imhash {

std::string key_file_mode_problem(uint32_t mode) {
  if (mode & (S_IROTH | S_IWOTH | S_IXOTH)) return "is accessible by other users";
  if (mode & S_IWGRP) return "is writable by its group";
  return {};
}

std::vector<uint8_t> load_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError("key file " + path + ": cannot open: " + std::strerror(errno));
  }
  // The mode of the file as opened (a symlink's target): a key anyone on the host can read is no
  // secret, so refuse it as ssh refuses such a private key.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (const std::string problem = key_file_mode_problem(st.st_mode); !problem.empty()) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      throw ConfigError("key file " + path + " " + problem + " (mode " + mode +
                        "): chmod 600 it (or 640 with the daemon's group)");
    }
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
