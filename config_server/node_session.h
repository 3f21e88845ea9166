// NodeSession: the config server's side of one node link (a hash or login server dialled in;
// docs/design.md §4–§5): reads control messages and hands them to the ConfigService, and queues
// messages to the node, written in order, one write at a time.
//
// What one link may cost is bounded (docs/security.md, "config server node port"): a connection
// that has not registered within NodeLinkLimits::register_timeout is closed, and so is a registered
// one that sends nothing for idle_timeout; the read buffer starts small, is allocated at the first
// read and grows for one message up to the limit of the link's state (a register is all an
// unregistered link may send); a longer length prefix closes the link.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/routing/control_protocol.h"
#include "config_server/node_auth.h"
#include "config_server/node_registry.h"

namespace imhash {

class ConfigService;

struct NodeLinkLimits {
  std::chrono::milliseconds register_timeout{5000};
  std::chrono::milliseconds idle_timeout{6000};  // registered, nothing received: closed
  size_t initial_buffer = 4 * 1024;
  // Node -> config messages are small (register, heartbeat with stats, ack, purge report).
  uint32_t max_unregistered_message = 64 * 1024;
  uint32_t max_message = 1 << 20;
};

// At most one warn line a second for one kind of event, so that a flood of connections does not
// flood the log; the next line says how many were left out.
struct LogBudget {
  int64_t last_ns = 0;
  uint64_t skipped = 0;
  // True if a line may be logged now; `more` is then "" or " (N more like it in the last second)".
  bool allow(std::string& more);
};

// Why links were closed by the config server's side, for /metrics, and the log's budget for them.
struct NodeLinkCounters {
  uint64_t register_timeouts = 0;
  uint64_t idle_timeouts = 0;
  uint64_t bad_messages = 0;  // malformed, or longer than the link's limit
  LogBudget closes_log;
};

class NodeSession : public std::enable_shared_from_this<NodeSession> {
 public:
  // `tls` (--tls-cert, --tls-key, --tls-ca; null: plain TCP): the link runs TLS from its first
  // byte, the node's certificate checked against the CA (within limits.register_timeout).
  // `id`: the link's number, unique in this process (NodeListener counts them).
  NodeSession(cluster::LinkId id, boost::asio::ip::tcp::socket socket, ConfigService& service,
              const NodeLinkLimits& limits, NodeLinkCounters& counters,
              std::shared_ptr<boost::asio::ssl::context> tls = nullptr);

  void start();
  void send(const control::Message& m);
  // One message already framed by control::append_message (a table push encoded once for all).
  void send_encoded(std::span<const uint8_t> framed);
  void close();
  // Sends `m` (a refusal), then closes the link once it is written; nothing is read after it.
  void send_last(const control::Message& m);
  bool is_open() const { return !closed_ && !close_when_written_; }
  const std::string& peer() const { return peer_; }
  // The peer's IP address, IPv4-mapped IPv6 folded to IPv4 (the per-source connection cap).
  const boost::asio::ip::address& peer_address() const { return peer_address_; }
  cluster::LinkId id() const { return id_; }
  // The node this link registered as ("hash/hash1"); empty before register. Set by the service.
  const std::string& key() const { return key_; }
  void registered_as(std::string key) { key_ = std::move(key); }
  // Released when the session dies: the listener's count of the links open (NodeListener).
  std::shared_ptr<void> slot;

 private:
  boost::asio::awaitable<void> read_loop();
  void write_next();
  void queued();  // after appending to queued_
  void arm_timer(std::chrono::steady_clock::duration after);
  void on_timer();

  const cluster::LinkId id_;
  std::string key_;
  boost::asio::ip::tcp::socket socket_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  ConfigService& service_;
  const NodeLinkLimits& limits_;
  NodeLinkCounters& counters_;
  std::string peer_;
  boost::asio::ip::address peer_address_;
  std::vector<uint8_t> queued_;
  std::vector<uint8_t> writing_;
  bool write_in_progress_ = false;
  bool closed_ = false;
  // The registration deadline, then the idle check: one timer per link.
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point last_read_;
  NodeAuth auth_;  // the cluster-key handshake, before anything reaches the service
  bool close_when_written_ = false;  // send_last(): the queue is the link's last words
};

}  // namespace imhash
