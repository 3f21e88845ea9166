#include "common/runtime/cluster_key.h"

#include "common/codec/endpoint.h"
#include "common/runtime/key_file.h"

namespace po = boost::program_options;

namespace imhash {

void ClusterKey::add_options(Options& opts) {
  opts.add()("cluster-key-file", po::value<std::string>(),
             "file holding the cluster key in hex (at least 32 hex digits, mode 600 or 640; every "
             "node of the cluster has the same one): both ends of every internal link (login -> "
             "hash, node -> config) prove they hold it, and peers that do not are refused")(
      "insecure", po::bool_switch(),
      "allow listening for internal links on a non-loopback address without a cluster key "
      "(anyone who reaches the port can then act as a node); without it such a listener is "
      "refused at start-up");
}

ClusterKey ClusterKey::from(const Options& opts) {
  ClusterKey k;
  if (opts.has("cluster-key-file"))
    k.key = load_key_file(opts.get<std::string>("cluster-key-file"));
  k.insecure = opts.get<bool>("insecure");
  return k;
}

void ClusterKey::check_listener(const std::string& host, const std::string& flag) const {
  check_internal_listener(host, flag, enabled(), insecure, "--cluster-key-file FILE");
}

void check_internal_listener(const std::string& host, const std::string& flag, bool has_credential,
                             bool insecure, const std::string& credential) {
  if (has_credential || insecure || is_loopback_host(host)) return;
  throw UsageError(flag + " " + host + " is not a loopback address and there is no " + credential +
                   ": anyone who reaches it could act as this cluster's operator "
                   "or node; give " +
                   credential + " (or --insecure on a network you trust)");
}

}  // namespace imhash
