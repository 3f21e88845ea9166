#include "common/runtime/tls_options.h"

#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/runtime/key_file.h"

namespace po = boost::program_options;
namespace ssl = boost::asio::ssl;

namespace imhash {

void TlsOptions::add_options(Options& opts) {
  opts.add()("tls-cert", po::value<std::string>(),
             "this node's certificate chain (PEM), signed by the --tls-ca CA: with --tls-key and "
             "--tls-ca, every internal link (login -> hash, node -> config server) runs TLS 1.3 "
             "with certificates checked both ways, so give them to every daemon of the cluster "
             "(peers without TLS, or with a certificate another CA signed, are refused)")(
      "tls-key", po::value<std::string>(),
      "the private key of --tls-cert (PEM; mode 600 or 640, like the cluster key file)")(
      "tls-ca", po::value<std::string>(),
      "the CA certificate (PEM) that signs every node's certificate: a peer must present one it "
      "signed");
}

namespace {

// Throws ConfigError unless `path` can be opened for reading.
void check_readable(const std::string& flag, const std::string& path) {
  if (path.empty()) throw UsageError(flag + ": expected a file, got ''");
  std::ifstream in(path);
  if (!in) throw ConfigError(flag + " " + path + ": cannot open: " + std::strerror(errno));
}

// Runs one load step of the context; a failure becomes a ConfigError naming the flag and file.
template <typename Step>
void load(const std::string& flag, const std::string& path, Step step) {
  boost::system::error_code ec;
  step(ec);
  if (ec) throw ConfigError(flag + " " + path + ": " + ec.message());
}

}  // namespace

TlsOptions TlsOptions::from_files(std::string cert, std::string key, std::string ca) {
  TlsOptions t{.cert_file = std::move(cert),
               .key_file = std::move(key),
               .ca_file = std::move(ca),
               .context = nullptr};
  const int given = !t.cert_file.empty() + !t.key_file.empty() + !t.ca_file.empty();
  if (given == 0) return t;
  if (given != 3) {
    throw UsageError(
        "--tls-cert, --tls-key and --tls-ca go together: give all three (TLS on the internal "
        "links) or none");
  }
  check_readable("--tls-cert", t.cert_file);
  check_readable("--tls-key", t.key_file);
  check_readable("--tls-ca", t.ca_file);
  struct stat st {};
  if (::stat(t.key_file.c_str(), &st) == 0) {
    if (const std::string problem = key_file_mode_problem(st.st_mode); !problem.empty()) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      throw ConfigError("--tls-key " + t.key_file + " " + problem + " (mode " + mode +
                        "): chmod 600 it (or 640 with the daemon's group)");
    }
  }
  // One context for both roles (a hash server accepts, a login server dials): the verify mode's
  // "fail if no peer certificate" applies to the server side, and a client always checks the
  // server's certificate once verify_peer is set.
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls);
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_3_VERSION) != 1) {
    throw ConfigError("TLS: this OpenSSL cannot require TLS 1.3");
  }
  ctx->set_options(ssl::context::no_compression);
  load("--tls-cert", t.cert_file,
       [&](boost::system::error_code& ec) { ctx->use_certificate_chain_file(t.cert_file, ec); });
  load("--tls-key", t.key_file, [&](boost::system::error_code& ec) {
    ctx->use_private_key_file(t.key_file, ssl::context::pem, ec);
  });
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    throw ConfigError("--tls-key " + t.key_file + " is not the key of --tls-cert " + t.cert_file);
  }
  load("--tls-ca", t.ca_file,
       [&](boost::system::error_code& ec) { ctx->load_verify_file(t.ca_file, ec); });
  ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  t.context = std::move(ctx);
  return t;
}

TlsOptions TlsOptions::from(const Options& opts) {
  auto get = [&](const char* key) {
    return opts.has(key) ? opts.get<std::string>(key) : std::string();
  };
  if ((opts.has("tls-cert") && get("tls-cert").empty()) ||
      (opts.has("tls-key") && get("tls-key").empty()) ||
      (opts.has("tls-ca") && get("tls-ca").empty())) {
    throw UsageError("--tls-cert, --tls-key, --tls-ca: expected a file, got ''");
  }
  return from_files(get("tls-cert"), get("tls-key"), get("tls-ca"));
}

}  // namespace imhash
