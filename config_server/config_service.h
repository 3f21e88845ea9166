// ConfigService: the config server's adapter around its core (docs/design.md §5). The rules —
// registration, trust, DOWN and LAGGING, table changes and the takeover hold, streams, purges,
// drains and refills — are cluster::ClusterController's (config_server/cluster_controller.h);
// this class owns what they may not: the node links (by LinkId), the watchdog timer, the store,
// the clocks and the log. It hands the controller each event with the time, performs the actions
// it returns, writes table changes to the store and hands back the result, and answers the admin
// API and /metrics as views over the controller's state.
//
// What a node says is not taken on trust (docs/security.md, "config server node port"): a name
// held by a live link is not handed to a second connection; a version above the latest the config
// server pushed (in a register, heartbeat or ack) is rejected and counted; a node that has not
// acknowledged the latest version within the DOWN window (missed_heartbeats_down intervals) after
// it was pushed is LAGGING, shown as such, and no longer holds up convergence or the automatic
// purge. A table change whose push would not fit in one control message is refused before it is
// written.
//
// Several config servers may share one etcd store (config_server/leadership.h): then only the
// leader serves. A standby refuses node registrations (naming the leader's node address, which
// nodes dial next) and answers every admin request 503 naming the leader; lead() starts it from
// what the store holds, step_down() closes every node link and forgets the nodes.
//
// Not thread-safe: everything runs on the config server's main io_context thread (checked in debug
// builds).
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/codec/thread_check.h"
#include "common/routing/control_protocol.h"
#include "common/runtime/metrics.h"
#include "config_server/admin_backend.h"
#include "config_server/cluster_controller.h"
#include "config_server/leadership.h"
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

// What main gives the service about the control plane (config_server/leadership.h); each may be
// empty (one config server on a file store).
struct ControlPlaneHooks {
  std::function<boost::json::object()> status;  // members of status "control_plane"
  // The leader as last seen, for a standby's answers (nullopt: none known).
  std::function<std::optional<ConfigServerInfo>()> leader;
  std::function<void(MetricsText&)> metrics;  // more /metrics lines
};

class ConfigService final : public AdminBackend {
 public:
  // Leads at once unless set_control_plane() says otherwise.
  ConfigService(boost::asio::io_context& ctx, StateStore& store, ConfigServiceSettings settings);

  // Before start(): `name` is this config server's, `leading` whether it serves now.
  void set_control_plane(std::string name, ControlPlaneHooks hooks, bool leading);
  // Elected: reads the state again from the store and serves. "" or what failed (then it stays a
  // standby).
  std::string lead();
  // Deposed (`why`, in words): closes every node link and forgets the nodes, drains, refills and
  // convergence; answers as a standby from now on.
  void step_down(const std::string& why);
  bool leading() const { return leading_; }

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
  AdminResult set_replicas(uint32_t replicas) override;
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
  AdminResult drain(const std::string& server) override;
  AdminResult drain_status(const std::string& server) override;
  AdminResult streams() override;
  AdminResult stream_control(const std::string& server, StreamControl action) override;
  std::optional<AdminResult> standby_answer() override;

 private:
  using Node = cluster::NodeRecord;

  // The clocks, read once an event.
  static cluster::Now now();
  // What the store holds, for the controller to start from.
  cluster::StoredState stored_state() const;
  // Performs the controller's actions, in order.
  void perform(cluster::Actions actions);
  // Writes a table change, hands the store's answer to the controller, performs what it says.
  AdminResult commit(cluster::ChangePlan plan);
  // An admin change's answer: at once, or once written (commit).
  AdminResult answer(cluster::Change change);
  AdminResult answer(cluster::Outcome outcome);
  // The open link `link` (null: none).
  std::shared_ptr<NodeSession> session_of(cluster::LinkId link) const;

  // The admin views (config_service_admin.cpp).
  boost::json::object node_json(const Node& n) const;
  boost::json::object stream_json(const Node& n) const;
  boost::json::object pending_json(const PendingPurge& p) const;
  boost::json::object drain_json(const std::string& server, const cluster::Drain& d) const;
  // A table as the admin API shows it: its JSON file form, parsed.
  static boost::json::value table_value(const Table& t);

  ThreadCheck thread_;  // the thread that constructed it
  StateStore& store_;
  const ConfigServiceSettings settings_;
  boost::asio::steady_timer timer_;
  cluster::ClusterController controller_;
  // The node links that have spoken, by the id the listener gave them: the controller knows
  // links only by id.
  std::unordered_map<cluster::LinkId, std::weak_ptr<NodeSession>> links_;
  uint64_t auth_refused_ = 0;  // node links that did not prove the cluster key

  // The control plane (several config servers, one store).
  std::string standby_reason() const;
  // store_.commit / set_pending_purges, timed for status and /metrics.
  std::string store_write(const std::function<std::string()>& write);
  std::string name_;
  ControlPlaneHooks hooks_;
  bool leading_ = true;
  std::string standby_why_;  // why it does not lead (as a standby)
  uint64_t store_writes_ = 0;
  uint64_t store_write_errors_ = 0;
  double store_last_ms_ = 0;
  double store_total_ms_ = 0;
};

}  // namespace imhash
