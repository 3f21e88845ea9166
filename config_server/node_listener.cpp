#include "config_server/node_listener.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/codec/endpoint.h"
#include "common/runtime/metrics.h"
#include "config_server/config_metrics.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace imhash {

NodeListener::NodeListener(asio::io_context& ctx, const tcp::endpoint& at, ConfigService& service,
                           NodeListenerLimits limits, std::shared_ptr<asio::ssl::context> tls)
    : acceptor_(ctx), service_(service), limits_(limits), tls_(std::move(tls)) {
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

namespace {

// Counts one link while it lives (NodeSession::slot).
template <typename Counts>
class LinkSlot {
 public:
  LinkSlot(std::shared_ptr<Counts> counts, asio::ip::address from)
      : counts_(std::move(counts)), from_(std::move(from)) {
    ++counts_->total;
    ++counts_->by_source[from_];
  }
  ~LinkSlot() {
    --counts_->total;
    if (auto it = counts_->by_source.find(from_);
        it != counts_->by_source.end() && --it->second == 0) {
      counts_->by_source.erase(it);
    }
  }
  LinkSlot(const LinkSlot&) = delete;
  LinkSlot& operator=(const LinkSlot&) = delete;

 private:
  std::shared_ptr<Counts> counts_;
  asio::ip::address from_;
};

}  // namespace

std::string NodeListener::over_cap(const asio::ip::address& peer) {
  if (counts_->total >= limits_.max_connections) {
    ++refused_total_;
    return "at most " + std::to_string(limits_.max_connections) +
           " node links may be open (--max-node-connections)";
  }
  const auto from = counts_->by_source.find(peer);
  if (from != counts_->by_source.end() && from->second >= limits_.max_per_source) {
    ++refused_per_source_;
    return "at most " + std::to_string(limits_.max_per_source) + " node links may come from " +
           peer.to_string() + " (--max-node-connections-per-source)";
  }
  return {};
}

asio::awaitable<void> NodeListener::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (!acceptor_.is_open()) co_return;
    if (ec) {
      spdlog::warn("node accept: {}", ec.message());
      continue;
    }
    auto session = std::make_shared<NodeSession>(++links_opened_, std::move(socket), service_,
                                                 limits_.link, counters_, tls_);
    if (std::string why = over_cap(session->peer_address()); !why.empty()) {
      if (std::string more; refusal_log_.allow(more)) {
        spdlog::warn("node link from {} refused: {}; closed{}", session->peer(), why, more);
      }
      session->close();
      continue;
    }
    session->slot = std::make_shared<LinkSlot<Counts>>(counts_, session->peer_address());
    session->start();
    if (open_.size() >= 2 * counts_->total + 64) {
      std::erase_if(open_, [](const std::weak_ptr<NodeSession>& w) { return w.expired(); });
    }
    open_.push_back(session);
  }
}

void NodeListener::append_metrics(MetricsText& m) const {
  m.add(config_metrics::kNodeLinksOpen, static_cast<double>(counts_->total));
  m.add(config_metrics::kNodeLinksRefusedTotal, static_cast<double>(refused_total_),
        {{"cap", "total"}});
  m.add(config_metrics::kNodeLinksRefusedTotal, static_cast<double>(refused_per_source_),
        {{"cap", "per_source"}});
  m.add(config_metrics::kNodeLinksClosedTotal, static_cast<double>(counters_.register_timeouts),
        {{"reason", "register_timeout"}});
  m.add(config_metrics::kNodeLinksClosedTotal, static_cast<double>(counters_.idle_timeouts),
        {{"reason", "idle"}});
  m.add(config_metrics::kNodeLinksClosedTotal, static_cast<double>(counters_.bad_messages),
        {{"reason", "bad_message"}});
}

}  // namespace imhash
