#include "config_server/node_listener.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/endpoint.h"
#include "common/metrics.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace imhash {

NodeListener::NodeListener(asio::io_context& ctx, const tcp::endpoint& at, ConfigService& service,
                           NodeListenerLimits limits)
    : acceptor_(ctx), service_(service), limits_(limits) {
  acceptor_.open(at.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(at);
  acceptor_.listen();
}

void NodeListener::start() {
  asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached);
}

void NodeListener::stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (const auto& w : open_) {
    if (auto s = w.lock()) s->close();
  }
}

std::string NodeListener::over_cap(const asio::ip::address& peer) {
  std::erase_if(open_, [](const std::weak_ptr<NodeSession>& w) { return w.expired(); });
  if (open_.size() >= limits_.max_connections) {
    ++refused_total_;
    return "at most " + std::to_string(limits_.max_connections) +
           " node links may be open (--max-node-connections)";
  }
  const auto from_peer = std::count_if(open_.begin(), open_.end(), [&](const auto& w) {
    const auto s = w.lock();
    return s && s->peer_address() == peer;
  });
  if (static_cast<size_t>(from_peer) >= limits_.max_per_source) {
    ++refused_per_source_;
    return "at most " + std::to_string(limits_.max_per_source) + " node links may come from " +
           peer.to_string() + " (--max-node-connections-per-source)";
  }
  return {};
}

void NodeListener::log_refusal(const std::string& peer, const std::string& why) {
  const int64_t now = monotonic_ns();
  if (last_refusal_log_ns_ != 0 && now - last_refusal_log_ns_ < 1'000'000'000) {
    ++refusals_not_logged_;
    return;
  }
  std::string more;
  if (refusals_not_logged_ > 0) {
    more = " (and " + std::to_string(refusals_not_logged_) + " more refused in the last second)";
  }
  spdlog::warn("node link from {} refused: {}; closed{}", peer, why, more);
  last_refusal_log_ns_ = now;
  refusals_not_logged_ = 0;
}

asio::awaitable<void> NodeListener::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (!acceptor_.is_open()) co_return;
    if (ec) {
      spdlog::warn("node accept: {}", ec.message());
      continue;
    }
    auto session =
        std::make_shared<NodeSession>(std::move(socket), service_, limits_.link, counters_);
    if (std::string why = over_cap(session->peer_address()); !why.empty()) {
      log_refusal(session->peer(), why);
      session->close();
      continue;
    }
    session->start();
    open_.push_back(session);
  }
}

void NodeListener::append_metrics(MetricsText& m) const {
  const auto open = std::count_if(open_.begin(), open_.end(), [](const auto& w) {
    const auto s = w.lock();
    return s && s->is_open();
  });
  m.gauge("imhash_config_node_links_open", "node links open (registered or not)",
          static_cast<double>(open));
  const char* refused_help = "node connections closed at once: over a connection cap";
  m.counter("imhash_config_node_links_refused_total", refused_help,
            static_cast<double>(refused_total_), {{"cap", "total"}});
  m.counter("imhash_config_node_links_refused_total", refused_help,
            static_cast<double>(refused_per_source_), {{"cap", "per_source"}});
  const char* closed_help =
      "node links the config server closed: no register in time, idle, a "
      "malformed or oversize message";
  m.counter("imhash_config_node_links_closed_total", closed_help,
            static_cast<double>(counters_.register_timeouts), {{"reason", "register_timeout"}});
  m.counter("imhash_config_node_links_closed_total", closed_help,
            static_cast<double>(counters_.idle_timeouts), {{"reason", "idle"}});
  m.counter("imhash_config_node_links_closed_total", closed_help,
            static_cast<double>(counters_.bad_messages), {{"reason", "bad_message"}});
}

}  // namespace imhash
