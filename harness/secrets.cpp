#include "harness/secrets.h"

#include <fcntl.h>
#include <unistd.h>

#include <random>
#include <stdexcept>

#include "harness/run_logs.h"

namespace imhash::test {

void write_private(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) throw std::runtime_error("cannot write " + path);
}

std::string random_hex_key() {
  std::random_device rd;
  std::string hex;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 0; i < 64; ++i) hex += kDigits[rd() % 16];
  return hex;
}

ClusterSecrets make_cluster_secrets(const std::string& who) {
  ClusterSecrets s{RunLogs::dir() + "/" + who + ".cluster.key",
                   RunLogs::dir() + "/" + who + ".admin.token"};
  write_private(s.key_file, random_hex_key());
  write_private(s.token_file, who + "-admin-token-" + std::to_string(::getpid()) + "\n");
  return s;
}

}  // namespace imhash::test
