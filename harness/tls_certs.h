// TlsCerts: TLS certificates made for a test at run time by scripts/tls_certs.sh (openssl(1)): a
// CA that signs "login" and "hash", and another CA that signs "stranger". Needs IMHASH_SOURCE_DIR
// (the repository, where the script is). Used from the test's thread.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace imhash::test {

struct TlsCerts {
  std::string dir;

  // Makes the certificates in a fresh directory named after `what` and this process.
  explicit TlsCerts(const std::string& what)
      : dir(std::filesystem::absolute(what + ".tls." + std::to_string(getpid())).string()) {
    std::filesystem::remove_all(dir);
    // Built with appends: g++ 12 at -O2 reports a false -Warray-bounds when a std::string made
    // from a literal is concatenated with another (the GCC 105329 family).
    for (const char* args : {" ca login hash", " other-ca stranger"}) {
      std::string cmd = IMHASH_SOURCE_DIR;
      cmd.append("/scripts/tls_certs.sh '").append(dir).append("'").append(args);
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    }
  }
  ~TlsCerts() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TlsCerts(const TlsCerts&) = delete;
  TlsCerts& operator=(const TlsCerts&) = delete;

  std::string cert(const std::string& node) const { return dir + "/" + node + ".pem"; }
  std::string key(const std::string& node) const { return dir + "/" + node + ".key"; }
  std::string ca() const { return dir + "/ca.pem"; }
  std::string other_ca() const { return dir + "/other-ca.pem"; }
  // The three flags for `node`, whose certificate the CA `ca_file` checks peers against.
  std::vector<std::string> flags(const std::string& node, const std::string& ca_file = {}) const {
    return {"--tls-cert", cert(node), "--tls-key",
            key(node),    "--tls-ca", ca_file.empty() ? ca() : ca_file};
  }
};

}  // namespace imhash::test
