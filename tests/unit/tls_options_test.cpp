// --tls-cert, --tls-key, --tls-ca (common/runtime/tls_options.h): all three or none, and every bad
// file is refused at start-up with an error naming it.
#include "common/runtime/tls_options.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>

#include "harness/tls_certs.h"

using namespace imhash;
using imhash::test::TlsCerts;

namespace {

// The message of the exception of type E that `f` throws ("" if it throws none, or another type).
template <typename E>
std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
    return "another exception";
  }
  return "";
}

}  // namespace

TEST_CASE("tls options: none is off, all three good files build a context") {
  CHECK_FALSE(TlsOptions::from_files("", "", "").enabled());
  const TlsCerts certs("tls_options_good");
  const auto t = TlsOptions::from_files(certs.cert("hash"), certs.key("hash"), certs.ca());
  CHECK(t.enabled());
  CHECK(t.cert_file == certs.cert("hash"));
}

TEST_CASE("tls options: some of the three is a usage error") {
  const TlsCerts certs("tls_options_partial");
  CHECK(thrown<UsageError>([&] {
          TlsOptions::from_files(certs.cert("hash"), "", "");
        }).find("go together") != std::string::npos);
  CHECK(thrown<UsageError>([&] {
          TlsOptions::from_files(certs.cert("hash"), certs.key("hash"), "");
        }).find("go together") != std::string::npos);
  CHECK(thrown<UsageError>([&] {
          TlsOptions::from_files("", "", certs.ca());
        }).find("go together") != std::string::npos);
}

TEST_CASE("tls options: a bad file is a config error naming it") {
  const TlsCerts certs("tls_options_bad");
  const std::string missing = certs.dir + "/missing.pem";
  CHECK(thrown<ConfigError>([&] {
          TlsOptions::from_files(missing, certs.key("hash"), certs.ca());
        }).find("--tls-cert " + missing + ": cannot open") != std::string::npos);
  const std::string junk = certs.dir + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  CHECK(thrown<ConfigError>([&] {
          TlsOptions::from_files(junk, certs.key("hash"), certs.ca());
        }).find("--tls-cert " + junk) != std::string::npos);
  CHECK(thrown<ConfigError>([&] {
          TlsOptions::from_files(certs.cert("hash"), certs.key("hash"), junk);
        }).find("--tls-ca " + junk) != std::string::npos);
  // The key of another certificate.
  CHECK(thrown<ConfigError>([&] {
          TlsOptions::from_files(certs.cert("hash"), certs.key("login"), certs.ca());
        }).find("--tls-key " + certs.key("login") + ":") != std::string::npos);
}

TEST_CASE("tls options: a private key readable by others is refused") {
  const TlsCerts certs("tls_options_mode");
  ::chmod(certs.key("hash").c_str(), 0644);
  const std::string e = thrown<ConfigError>(
      [&] { TlsOptions::from_files(certs.cert("hash"), certs.key("hash"), certs.ca()); });
  CHECK(e.find("--tls-key " + certs.key("hash") + " is accessible by other users (mode 0644)") !=
        std::string::npos);
  ::chmod(certs.key("hash").c_str(), 0640);
  CHECK(TlsOptions::from_files(certs.cert("hash"), certs.key("hash"), certs.ca()).enabled());
}
