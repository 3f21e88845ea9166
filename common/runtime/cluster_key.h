// The cluster key (docs/security.md §5): the secret every node of one cluster shares, with which
// both ends of each internal TCP link prove themselves (common/security/link_auth.h), and the "safe
// by default" rule that goes with it: without a key, a daemon listens for internal links on
// loopback only, unless the operator says --insecure. Declared and read at start-up on the main
// thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/runtime/options.h"

namespace imhash {

struct ClusterKey {
  std::vector<uint8_t> key{};  // empty: no key (links are not authenticated)
  bool insecure = false;       // --insecure: internal listeners may be public without a key

  bool enabled() const { return !key.empty(); }

  // Declares --cluster-key-file and --insecure.
  static void add_options(Options& opts);
  // Reads them; a bad key file throws ConfigError naming the file (common/runtime/key_file.h).
  static ClusterKey from(const Options& opts);

  // Throws UsageError, in one line naming `flag`, if `host` (what `flag` binds) is not loopback
  // while there is no key and no --insecure: anyone who reaches that address could act as a node.
  void check_listener(const std::string& host, const std::string& flag) const;
};

// The same rule for any internal listener and its credential (the admin API and its token):
// throws UsageError unless `host` is loopback, `has_credential`, or `insecure`. `credential` names
// what would make it safe ("--admin-token-file FILE").
void check_internal_listener(const std::string& host, const std::string& flag, bool has_credential,
                             bool insecure, const std::string& credential);

}  // namespace imhash
