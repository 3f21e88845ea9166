// NodeSession: the config server's side of one node link (a hash or login server dialled in;
// docs/design.md §4–§5): reads control messages and hands them to the ConfigService, and queues
// messages to the node, written in order, one write at a time. A connection that has not
// registered within kRegisterTimeout is closed, so silent connections cannot pile up.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/control_protocol.h"
#include "config_server/node_auth.h"

namespace imhash {

class ConfigService;

class NodeSession : public std::enable_shared_from_this<NodeSession> {
 public:
  static constexpr std::chrono::seconds kRegisterTimeout{5};

  // `tls` (--tls-cert, --tls-key, --tls-ca; null: plain TCP): the link runs TLS from its first
  // byte, the node's certificate checked against the CA (within kRegisterTimeout).
  NodeSession(boost::asio::ip::tcp::socket socket, ConfigService& service,
              std::shared_ptr<boost::asio::ssl::context> tls = nullptr);

  void start();
  void send(const control::Message& m);
  void close();
  // Sends `m` (a refusal), then closes the link once it is written; nothing is read after it.
  void send_last(const control::Message& m);
  const std::string& peer() const { return peer_; }
  // The node this link registered as ("hash/hash1"); empty before register.
  std::string key;

 private:
  boost::asio::awaitable<void> read_loop();
  void write_next();

  boost::asio::ip::tcp::socket socket_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  ConfigService& service_;
  std::string peer_;
  std::vector<uint8_t> queued_;
  std::vector<uint8_t> writing_;
  bool write_in_progress_ = false;
  bool closed_ = false;
  boost::asio::steady_timer register_timer_;
  NodeAuth auth_;  // the cluster-key handshake, before anything reaches the service
  bool close_when_written_ = false;  // send_last(): the queue is the link's last words
};

}  // namespace imhash
