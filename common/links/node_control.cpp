#include "common/links/node_control.h"

#include <unistd.h>

#include "common/codec/endpoint.h"
#include "common/runtime/config_addresses.h"

namespace imhash {

namespace po = boost::program_options;

void NodeControl::add_options(Options& opts, const std::string& config_help,
                              const std::string& advertise_help) {
  const std::string help = config_help +
                           ". Several config servers, comma-separated (A:P,B:P), are tried in "
                           "turn: the next one after a failed connect or a lost connection";
  opts.add()("config", po::value<std::string>(), help.c_str())(
      "advertise", po::value<std::string>(), advertise_help.c_str())(
      "state-dir", po::value<std::string>(),
      "directory to keep the last table this server ran in (ROLE-NAME.table.json, replaced "
      "atomically): after a restart it starts from that table, and serves it while no config "
      "server answers")("metrics", po::value<std::string>(),
                        "HOST:PORT to serve Prometheus metrics on (GET /metrics); printed as a "
                        "second 'listening on' line");
  ClusterKey::add_options(opts);
  TlsOptions::add_options(opts);
}

NodeControl::Endpoints NodeControl::endpoints(const Options& opts) {
  Endpoints e;
  if (opts.has("config")) {
    e.config_address = opts.get<std::string>("config");
    ConfigAddresses::parse(e.config_address, "--config");  // a malformed list is a usage error
  }
  if (opts.has("advertise")) {
    const std::string text = opts.get<std::string>("advertise");
    const auto a = parse_host_port(text, "--advertise");
    if (is_unspecified_host(a.host)) {
      throw UsageError("--advertise " + text +
                       ": an unspecified address cannot be dialled or shown; give the address "
                       "other hosts reach this server at");
    }
    e.advertise_host = a.host;
    e.advertise_port = a.port;
  }
  if (opts.has("state-dir")) {
    e.state_dir = opts.get<std::string>("state-dir");
    if (e.state_dir.empty()) throw UsageError("--state-dir: expected a directory, got ''");
  }
  if (opts.has("metrics")) {
    const auto m = parse_host_port(opts.get<std::string>("metrics"), "--metrics");
    e.metrics_host = m.host;
    e.metrics_port = m.port;
  }
  e.cluster_key = ClusterKey::from(opts);
  e.tls = TlsOptions::from(opts);
  return e;
}

std::string NodeControl::Endpoints::advertised(const std::string& bound_host,
                                               uint16_t bound_port) const {
  if (advertise_host.empty()) return format_host_port(bound_host, bound_port);
  return format_host_port(advertise_host, advertise_port ? advertise_port : bound_port);
}

NodeControl::NodeControl(boost::asio::io_context& ctx, Endpoints endpoints)
    : ctx_(ctx), endpoints_(std::move(endpoints)) {}

void NodeControl::start_config_link(control::Register self, ConfigLink::Callbacks callbacks) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!has_config_server()) return;
  self.pid = static_cast<uint64_t>(::getpid());
  ConfigLinkSettings settings;
  settings.cluster_key = endpoints_.cluster_key.key;
  settings.tls = endpoints_.tls.context;
  config_link_ = std::make_unique<ConfigLink>(ctx_, endpoints_.config_address, std::move(self),
                                              std::move(callbacks), std::move(settings));
  config_link_->start();
}

void NodeControl::start_metrics(std::function<void(MetricsText&)> render) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (endpoints_.metrics_host.empty()) return;
  metrics_ = std::make_unique<MetricsServer>(
      ctx_, endpoints_.metrics_host, endpoints_.metrics_port, [this, render = std::move(render)] {
        MetricsText m;
        render(m);
        m.add(node_metrics::kConfigLinkUp, config_link_ && config_link_->connected() ? 1 : 0);
        m.add(node_metrics::kConfigLinkRefusedTotal,
              static_cast<double>(config_link_ ? config_link_->refused_handshakes() : 0));
        return m.str();
      });
  metrics_->start();
  announce_listening(metrics_->local_address());
}

void NodeControl::stop() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (config_link_) config_link_->stop();
  if (metrics_) metrics_->stop();
}

}  // namespace imhash
