#include "common/node_control.h"

#include <unistd.h>

namespace imhash {

namespace po = boost::program_options;

void NodeControl::add_options(Options& opts, const std::string& config_help) {
  opts.add()("config", po::value<std::string>(), config_help.c_str())(
      "metrics", po::value<std::string>(),
      "HOST:PORT to serve Prometheus metrics on (GET /metrics); printed as a second "
      "'listening on' line");
}

NodeControl::Endpoints NodeControl::endpoints(const Options& opts) {
  Endpoints e;
  if (opts.has("config")) {
    e.config_address = opts.get<std::string>("config");
    parse_host_port(e.config_address, "--config");
  }
  if (opts.has("metrics")) {
    const auto m = parse_host_port(opts.get<std::string>("metrics"), "--metrics");
    e.metrics_host = m.host;
    e.metrics_port = m.port;
  }
  return e;
}

NodeControl::NodeControl(boost::asio::io_context& ctx, Endpoints endpoints)
    : ctx_(ctx), endpoints_(std::move(endpoints)) {}

void NodeControl::start_config_link(control::Register self, ConfigLink::Callbacks callbacks) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!has_config_server()) return;
  self.pid = static_cast<uint64_t>(::getpid());
  config_link_ = std::make_unique<ConfigLink>(ctx_, endpoints_.config_address, std::move(self),
                                              std::move(callbacks));
  config_link_->start();
}

void NodeControl::start_metrics(std::function<void(MetricsText&)> render) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (endpoints_.metrics_host.empty()) return;
  metrics_ = std::make_unique<MetricsServer>(
      ctx_, endpoints_.metrics_host, endpoints_.metrics_port, [this, render = std::move(render)] {
        MetricsText m;
        render(m);
        m.gauge("imhash_config_link_up", "1 while registered with the config server",
                config_link_ && config_link_->connected() ? 1 : 0);
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
