#include "login_server/login_server.h"

#include <spdlog/spdlog.h>

#include <future>

#include "common/options.h"

namespace asio = boost::asio;
using asio::ip::udp;

namespace imhash {

namespace {

// Binds one UDP socket of the SO_REUSEPORT group; the kernel spreads clients over the group.
udp::socket bind_udp(asio::io_context& ctx, const udp::endpoint& at) {
  udp::socket s(ctx);
  s.open(at.protocol());
  s.set_option(asio::socket_base::reuse_address(true));
  const int one = 1;
  if (setsockopt(s.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    throw std::runtime_error("SO_REUSEPORT is not available");
  }
  if (at.protocol() == udp::v6()) s.set_option(asio::ip::v6_only(false));
  // Room for bursts: a full receive buffer drops datagrams that clients must then retry.
  s.set_option(asio::socket_base::receive_buffer_size(8 << 20));
  s.set_option(asio::socket_base::send_buffer_size(8 << 20));
  s.bind(at);
  s.non_blocking(true);
  return s;
}

}  // namespace

LoginServer::LoginServer(LoginServerConfig config)
    : config_(std::move(config)), tables_(config_.grace) {
  tables_.load_file(config_.table_file);
}

void LoginServer::run() {
  udp::resolver resolver(ctx_);
  udp::endpoint at =
      resolver.resolve(config_.udp_host, std::to_string(config_.udp_port)).begin()->endpoint();
  std::vector<udp::socket> sockets;
  sockets.push_back(bind_udp(ctx_, at));
  at.port(sockets.front().local_endpoint().port());  // port 0: the others join the chosen port
  for (uint32_t i = 1; i < config_.threads; ++i) sockets.push_back(bind_udp(ctx_, at));

  const auto routing = tables_.latest();
  for (uint32_t i = 0; i < config_.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(i, config_.worker, &tables_));
    workers_.back()->set_routing(routing);
  }
  tables_.set_listener([this](std::shared_ptr<const RoutingState> r) {
    for (auto& w : workers_) w->set_routing(r);
  });
  for (uint32_t i = 0; i < config_.threads; ++i) {
    workers_[i]->start(sockets[i].release(), at.protocol());
  }

  // Announce only once every link has been tried, so a client's first request finds them up.
  std::vector<std::future<void>> tried;
  for (auto& w : workers_) {
    auto p = std::make_shared<std::promise<void>>();
    tried.push_back(p->get_future());
    w->when_links_tried([p] { p->set_value(); });
  }
  for (auto& f : tried) f.wait_for(std::chrono::seconds(5));

  asio::signal_set stop_signals(ctx_, SIGINT, SIGTERM);
  asio::signal_set reload_signal(ctx_, SIGHUP);
  stop_signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    reload_signal.cancel();
    for (auto& w : workers_) w->stop();
  });
  std::function<void()> wait_reload = [&] {
    reload_signal.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      spdlog::info("SIGHUP: re-reading {}", config_.table_file);
      tables_.refresh();
      wait_reload();
    });
  };
  wait_reload();

  spdlog::info("login server: {} threads, table version {} ({} mode, {} hash servers)",
               config_.threads, routing->version(), to_string(routing->current->mode()),
               routing->current->table().servers.size());
  const std::string host = at.address().is_v6() ? "[" + at.address().to_string() + "]"
                                                : at.address().to_string();
  announce_listening(host + ":" + std::to_string(at.port()));
  ctx_.run();
  for (auto& w : workers_) w->join();
  spdlog::info("stopped");
}

}  // namespace imhash
