// ConfigService: the config server's core (docs/design.md §3–§5). It owns the durable table
// history, the registry of nodes that dialled in, pushes every new version to all of them and
// tracks their acknowledgements, watches heartbeats (three missed: DOWN), fails over DOWN hash
// servers when asked to, and sends lazy purges: automatically to old owners once every login server
// runs the new version and the grace period has passed, on demand through the admin API, and "purge
// all" to a hash server that comes back after it was removed from the table.
//
// Not thread-safe: everything runs on the config server's main io_context thread (checked in debug
// builds).
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/control_protocol.h"
#include "common/router.h"
#include "common/thread_check.h"
#include "config_server/admin_backend.h"
#include "config_server/node_session.h"
#include "config_server/state_store.h"

namespace imhash {

struct ConfigServiceSettings {
  std::chrono::milliseconds heartbeat{1000};
  uint32_t missed_heartbeats_down = 3;
  std::chrono::milliseconds grace{60000};  // fallback reads at the previous owner after a change
  bool failover_auto = false;
  bool auto_purge = true;
  RoutingMode initial_mode = RoutingMode::kRing;
  std::vector<uint8_t> cluster_key;  // --cluster-key-file: nodes must prove it (NodeAuth)
};

class ConfigService final : public AdminBackend {
 public:
  ConfigService(boost::asio::io_context& ctx, StateStore& store, ConfigServiceSettings settings);

  void start();  // the watchdog timer
  void stop();   // closes every node link

  // Prometheus text for GET /metrics.
  std::string metrics_text() const;

  // From node sessions.
  void on_message(NodeSession& session, const control::Message& m);
  void on_disconnect(NodeSession& session);
  const std::vector<uint8_t>& cluster_key() const { return settings_.cluster_key; }
  // A node link refused for not proving the cluster key (counted in /metrics).
  void note_auth_refused() { ++auth_refused_; }

  // AdminBackend.
  AdminResult status() override;
  AdminResult table() override;
  AdminResult history(uint64_t limit) override;
  AdminResult servers() override;
  AdminResult where(uint64_t id) override;
  AdminResult set_mode(RoutingMode mode, std::optional<ModuloHash> modulo_hash) override;
  AdminResult add_servers(const std::vector<ServerSpec>& servers) override;
  AdminResult set_server(const std::string& name, const std::optional<std::string>& address,
                         const std::optional<uint32_t>& weight) override;
  AdminResult remove_servers(const std::vector<std::string>& names) override;
  AdminResult assign(uint64_t lo, uint64_t hi, const std::string& server) override;
  AdminResult split(uint64_t at) override;
  AdminResult merge(uint64_t lo, uint64_t hi) override;
  AdminResult purge(const std::string& server, frame::PurgeAction kind,
                    uint32_t age_seconds) override;
  AdminResult purge_status() override;

 private:
  struct Node {
    std::string role;  // "hash" or "login"
    std::string name;
    std::string address;
    uint32_t shards = 0;
    uint64_t pid = 0;
    uint64_t version = 0;  // acknowledged
    int64_t last_heard_ns = 0;
    int64_t last_push_ns = 0;
    bool up = false;
    bool rejoin_purge = false;  // purging everything after it came back removed
    boost::json::object stats;
    // Requests per second, from the request counters of two successive heartbeats.
    double requests_per_s = 0;
    double last_requests = -1;
    int64_t last_requests_ns = 0;
    std::vector<control::PurgeShard> purges;
    NodeSession* session = nullptr;
  };
  struct Convergence {
    uint64_t version = 0;
    int64_t started_ns = 0;
    std::optional<double> reached_ms;  // when every node that is up acknowledged it
  };
  struct PendingPurge {
    uint64_t version = 0;
    int64_t not_before_ns = 0;
    std::vector<std::string> servers;  // hash servers that may hold ids they no longer own
  };

  // Validates, writes durably, pushes. `next` has the current version; the new one is +1.
  AdminResult apply(TableResult next, const std::string& change);
  void push(Node& node);
  void send_purge(Node& node, frame::PurgeAction action, uint32_t age_seconds);
  void tick();
  void check_convergence();
  void maybe_auto_purge();
  void failover(Node& node);
  boost::json::object node_json(const Node& n) const;
  // Every node that is up runs the current version (imctl status: converged).
  bool converged() const;
  Node* find(const std::string& role, const std::string& name);
  bool was_ever_member(const std::string& name) const;
  static void update_rate(Node& n, int64_t now);
  boost::json::object change_result(const std::string& change);

  ThreadCheck thread_;  // the thread that constructed it
  StateStore& store_;
  const ConfigServiceSettings settings_;
  boost::asio::steady_timer timer_;
  std::map<std::string, Node> nodes_;  // "role/name"
  std::shared_ptr<const Router> router_;
  Convergence convergence_;
  std::optional<PendingPurge> pending_purge_;
  uint64_t auth_refused_ = 0;  // node links that did not prove the cluster key
};

}  // namespace imhash
