// The control plane of several config servers on one etcd store, as main wires it
// (docs/design.md §5): the --store URL, the addresses a config server advertises in the store, and
// what status and /metrics show of the election and the store.
//
// Plain functions; the ones taking a Leadership run on the config server's main thread.
#pragma once

#include <boost/json/object.hpp>
#include <string>
#include <vector>

#include "common/runtime/metrics.h"
#include "common/runtime/options.h"
#include "config_server/etcd_client.h"
#include "config_server/leadership.h"

namespace imhash {

struct EtcdUrl {
  std::vector<HostPort> endpoints;
  std::string prefix;  // "/imhash" unless the URL names one
};

// "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"; throws UsageError naming `what` (no scheme, no
// member, a bad or repeated address, port 0, an empty or odd prefix).
EtcdUrl parse_etcd_url(const std::string& text, const std::string& what);

// The address others dial for a listener bound at `bound` ("HOST:PORT"): with --advertise HOST,
// that host and the bound port; else `bound` itself, which must not be a wildcard (UsageError
// naming `what`).
std::string advertised(const std::string& bound, const Options& opts, const std::string& what);

// status "control_plane": role (leader / standby), leader, standbys, lease TTL, the latest problem.
boost::json::object control_plane_json(const Leadership& leadership);
// imhash_config_etcd_* and imhash_config_elections_won_total.
void append_control_plane_metrics(const Leadership& leadership, const EtcdClient& etcd,
                                  MetricsText& m);

}  // namespace imhash
