// NodeListener: the config server's node port (--listen): accepts hash and login servers' links
// and starts a NodeSession for each, within connection caps — at most max_connections links open
// at once, and at most max_per_source from one IP address (loopback counts as one source). A
// connection over a cap is accepted and closed at once, counted, and logged at warn at most once a
// second (a flood does not flood the log). stop() closes the acceptor and every open link,
// registered or not, so that SIGTERM ends the config server whatever its peers do.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config_server/node_session.h"

namespace imhash {

struct NodeListenerLimits {
  size_t max_connections = 1024;
  size_t max_per_source = 64;
  NodeLinkLimits link;
};

class NodeListener {
 public:
  // Binds and listens now (throws boost::system::system_error when it cannot).
  // `tls` (null: plain TCP): every link runs TLS from its first byte (NodeSession).
  NodeListener(boost::asio::io_context& ctx, const boost::asio::ip::tcp::endpoint& at,
               ConfigService& service, NodeListenerLimits limits,
               std::shared_ptr<boost::asio::ssl::context> tls = nullptr);

  void start();
  void stop();
  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  // Prometheus text: open links, refused connections, links closed by the limits.
  void append_metrics(class MetricsText& m) const;

 private:
  boost::asio::awaitable<void> accept_loop();
  // Why `peer` may not have another link now ("" if it may).
  std::string over_cap(const boost::asio::ip::address& peer);

  boost::asio::ip::tcp::acceptor acceptor_;
  ConfigService& service_;
  const NodeListenerLimits limits_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;
  NodeLinkCounters counters_;
  cluster::LinkId links_opened_ = 0;  // each link's id: the count so far
  // Every link accepted and still open (a session lives until its read loop and writes end), for
  // stop(); expired entries are dropped once they are as many as the live ones.
  std::vector<std::weak_ptr<NodeSession>> open_;
  // The links alive, in all and by source: kept by each session's slot, so a new connection is
  // judged in constant time (10,000 nodes reconnecting must not cost a scan each).
  struct Counts {
    size_t total = 0;
    std::map<boost::asio::ip::address, size_t> by_source;
  };
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
  uint64_t refused_total_ = 0;
  uint64_t refused_per_source_ = 0;
  LogBudget refusal_log_;
};

}  // namespace imhash
