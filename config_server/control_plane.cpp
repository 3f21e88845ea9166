#include "config_server/control_plane.h"

#include <boost/json.hpp>

#include "common/codec/endpoint.h"
#include "config_server/config_metrics.h"

namespace json = boost::json;

namespace imhash {

EtcdUrl parse_etcd_url(const std::string& text, const std::string& what) {
  constexpr std::string_view kScheme = "etcd://";
  if (!text.starts_with(kScheme)) {
    throw UsageError(what + " '" + text + "' must start with etcd:// (etcd://HOST:PORT,...)");
  }
  std::string rest = text.substr(kScheme.size());
  EtcdUrl url;
  url.prefix = "/imhash";
  // The prefix starts at the first '/' (an IPv6 member is in brackets, which hold no '/').
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    url.prefix = rest.substr(slash);
    rest.resize(slash);
    while (url.prefix.size() > 1 && url.prefix.back() == '/') url.prefix.pop_back();
    if (url.prefix.size() < 2 || url.prefix.find("//") != std::string::npos) {
      throw UsageError(what + " '" + text + "': the prefix must be like /imhash");
    }
  }
  std::vector<std::string> seen;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    if (comma == std::string::npos) comma = rest.size();
    const std::string member = rest.substr(start, comma - start);
    if (member.empty()) throw UsageError(what + " '" + text + "' names an empty etcd member");
    HostPort hp = parse_host_port(member, what);
    if (hp.port == 0) throw UsageError(what + " '" + member + "': an etcd member needs its port");
    if (std::find(seen.begin(), seen.end(), member) != seen.end()) {
      throw UsageError(what + " names " + member + " twice");
    }
    seen.push_back(member);
    url.endpoints.push_back(std::move(hp));
    start = comma + 1;
  }
  return url;
}

std::string advertised(const std::string& bound, const Options& opts, const std::string& what) {
  if (opts.has("advertise")) {
    const std::string host = opts.get<std::string>("advertise");
    const HostPort at = parse_host_port(bound, what);
    const std::string out = format_host_port(host, at.port);
    parse_host_port(out, "--advertise");  // a malformed host is a usage error here
    if (is_unspecified_address(out)) {
      throw UsageError("--advertise " + host + " is a wildcard: give an address others reach");
    }
    return out;
  }
  if (is_unspecified_address(bound)) {
    throw UsageError(what + " listens on " + bound +
                     ", which other config servers, nodes and imctl cannot dial: give --advertise "
                     "HOST with --store");
  }
  return bound;
}

json::object control_plane_json(const Leadership& l) {
  json::object o{{"role", l.leading() ? "leader" : "standby"},
                 {"lease_ttl_ms", l.ttl().count()},
                 {"terms", l.terms()}};
  o["leader"] = l.leader() ? json::value(l.leader()->to_json()) : json::value(nullptr);
  json::array standbys;
  for (const ConfigServerInfo& s : l.standbys()) standbys.push_back(s.to_json());
  o["standbys"] = std::move(standbys);
  if (!l.problem().empty()) o["problem"] = l.problem();
  return o;
}

void append_control_plane_metrics(const Leadership& l, const EtcdClient& etcd, MetricsText& m) {
  const EtcdStats& s = etcd.stats();
  m.add(config_metrics::kEtcdRequestsTotal, static_cast<double>(s.requests));
  m.add(config_metrics::kEtcdRequestFailuresTotal, static_cast<double>(s.failures));
  m.add(config_metrics::kEtcdRequestSecondsTotal, s.total_ms / 1000);
  m.add(config_metrics::kEtcdLastRequestSeconds, s.last_ms / 1000);
  m.add(config_metrics::kElectionsWonTotal, static_cast<double>(l.terms()));
  m.add(config_metrics::kStandbys, static_cast<double>(l.standbys().size()));
}

}  // namespace imhash
