// Optional TLS with mutual certificates on the internal links (docs/security.md §5): --tls-cert,
// --tls-key and --tls-ca, all three or none, and the one TLS context a daemon builds from them at
// start-up (TLS 1.3 only; each side presents its certificate and must see one the CA signed).
// Declared and read on the main thread; the context is then shared, read-only, by every thread's
// streams (OpenSSL's SSL_CTX may be used by several threads once set up).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/runtime/options.h"

namespace imhash {

struct TlsOptions {
  std::string cert_file;  // --tls-cert: this node's certificate chain (PEM)
  std::string key_file;   // --tls-key: its private key (PEM), not readable by others
  std::string ca_file;    // --tls-ca: the CA that signs every node's certificate
  // Built from the three files by from(); null when TLS is off.
  std::shared_ptr<boost::asio::ssl::context> context;

  bool enabled() const { return context != nullptr; }

  // Declares --tls-cert, --tls-key and --tls-ca.
  static void add_options(Options& opts);
  // Reads them and builds the context. Throws UsageError when only some are given, ConfigError
  // naming the file when one cannot be read, is no PEM of the right kind, the key does not match
  // the certificate, or the key file is readable by others (common/runtime/key_file.h).
  static TlsOptions from(const Options& opts);
  // The same from three paths (all empty: TLS off).
  static TlsOptions from_files(std::string cert, std::string key, std::string ca);
};

}  // namespace imhash
