// ConfigService: the config server's core (docs/design.md §3–§5). It owns the durable table
// history, the registry of nodes that dialled in, pushes every new version to all of them and
// tracks their acknowledgements, watches heartbeats (three missed: DOWN), fails over DOWN hash
// servers when asked to, tells hash servers to stream the records other servers now own to them
// (issue 13), and sends lazy purges: automatically to each old owner once the grace period has
// passed, every node that is up runs the new version and that server's stream is done (one pending
// purge per hash server, kept in the state file across restarts), on demand through the admin API,
// and "purge all" to a hash server that comes back (re-registers, or heartbeats again after DOWN)
// after it was removed from the table while it could not stream. Every purge it sends carries an
// id, so a purge it waits for is taken as done only from reports of that purge. It drains servers
// (`imctl drain`: out of the table by streaming) and shows how far each is.
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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/control_protocol.h"
#include "common/metrics.h"
#include "common/router.h"
#include "common/thread_check.h"
#include "config_server/admin_backend.h"
#include "config_server/leadership.h"
#include "config_server/node_registry.h"
#include "config_server/node_session.h"
#include "config_server/refills.h"
#include "config_server/state_store.h"
#include "config_server/takeover_hold.h"

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
  // A server being drained (imctl drain): out of the table at `version`; `purged` once its
  // automatic purge (or a purge of everything) was sent.
  struct Drain {
    uint64_t version = 0;
    bool purged = false;
  };

  // Validates, writes durably, pushes. `next` has the current version; the new one is +1.
  AdminResult apply(TableResult next, const std::string& change);
  void push(Node& node);
  // The current table's push, framed once for every node.
  const std::vector<uint8_t>& encoded_push();
  // A register, heartbeat or ack names `version`: the registry records it unless it is above the
  // latest version pushed (then it is rejected, logged here and counted there; false).
  bool take_version(Node& n, const NodeSession& session, cluster::VersionSource from,
                    uint64_t version);
  // Logs what the registry made of it: a node caught up, or a rejection (once a second a node).
  void note_version(Node& n, const NodeSession& session, cluster::VersionSource from,
                    uint64_t version, cluster::VersionTaken taken, uint64_t latest);
  // The open link of `n` (null: none).
  std::shared_ptr<NodeSession> link_of(const Node& n) const;
  int64_t down_after_ns() const;
  // After a takeover, how long (ns) changes and automatic purges still wait for the nodes to
  // register with this leader (0: they do not; cluster::TakeoverHold).
  int64_t settling_ns() const;
  // Whether `n` keeps the table it runs for now (cluster::TakeoverHold::holds_push).
  bool holds_push(const Node& n) const;
  // The version held back since the takeover goes to every node that is behind, now (`why`).
  void release_held_version(const char* why);
  // The registration is refused because `key` is held by a live link ("" if it may go ahead).
  std::string name_held(const cluster::NodeKey& key, const NodeSession& session) const;
  // Sends a purge with a fresh id and returns the id (0 if the node is not connected).
  uint64_t send_purge(Node& node, frame::PurgeAction action, uint32_t age_seconds);
  void send_stream(Node& node, control::StreamAction action, uint64_t version);
  // A hash server that registered or came back from DOWN: purge everything if it was removed
  // while it could not stream; else, if a purge is pending for it, stream again first.
  void on_rejoin(Node& node);
  // A hash server with a pending purge `p` that registered or came back must be told to stream.
  bool needs_stream(const Node& node, const PendingPurge& p) const;
  void on_purge_report(Node& node, const control::PurgeReport& report);
  // Replicas: a hash server of the table that registered empty (`fresh`) or with a refill not
  // complete (`filling`) is refilled by the others (config_server/refills.h).
  void maybe_refill(Node& node, bool fresh, bool filling);
  // Tells a server it is refilled (or that nobody can refill it): it answers NOT_FOUND again.
  void end_refill(const std::string& server, const char* why, bool refilled);
  // The peers of `server` have streamed to it (`why`): its refill ends once the login servers
  // have sent it what they held for it (maybe_end_refill).
  void streams_done(const std::string& server, const char* why);
  // Ends the refill of `server` if its streams are done and no login server that is up still
  // holds writes for it (or has not said since the refill started), or after kCatchUpPatience.
  void maybe_end_refill(const std::string& server, int64_t now_ns);
  // maybe_end_refill for every refill whose streams are done.
  void end_caught_up_refills(int64_t now_ns);
  // The login servers that are up and hold writes for `server`, or have not heartbeat since
  // `since_ns` plus a sample period.
  std::vector<std::string> logins_holding(const std::string& server, int64_t since_ns) const;
  // After a table change: refills of servers (or from peers) the table no longer has, or all of
  // them when it has no replicas, are over.
  void update_refills();
  // What the pending purge `p` still waits for, in words (empty: it may be sent); `held` is set
  // when only the operator can release it (a cancelled stream).
  std::vector<std::string> purge_waits(const PendingPurge& p, bool& held) const;
  PendingPurge* pending_for(const std::string& server);
  void save_pending(const char* why);
  boost::json::object pending_json(const PendingPurge& p) const;
  boost::json::object drain_json(const std::string& server, const Drain& d) const;
  // Writes the login servers that are up hold for hash server `server` (Node::held_writes).
  uint64_t replication_lag(const std::string& server) const;
  boost::json::object stream_json(const Node& n) const;
  void tick();
  void check_convergence();
  void maybe_auto_purge();
  void failover(Node& node);
  boost::json::object node_json(const Node& n) const;
  // Every node that is up and not LAGGING runs the current version (imctl status: converged).
  bool converged() const;
  // The hash server `name` as the registry knows it (null: never registered).
  Node* find_hash(const std::string& name) { return registry_.find({control::Role::kHash, name}); }
  const Node* find_hash(const std::string& name) const {
    return registry_.find({control::Role::kHash, name});
  }
  bool was_ever_member(const std::string& name) const;
  boost::json::object change_result(const std::string& change);
  // A table as the admin API shows it: its JSON file form, parsed.
  static boost::json::value table_value(const Table& t);

  ThreadCheck thread_;  // the thread that constructed it
  StateStore& store_;
  const ConfigServiceSettings settings_;
  boost::asio::steady_timer timer_;
  cluster::NodeRegistry registry_;
  // The node links open, by the id the listener gave them: the registry knows links only by id.
  std::map<cluster::LinkId, std::weak_ptr<NodeSession>> links_;
  std::shared_ptr<const Router> router_;
  std::vector<PendingPurge> pending_;  // as in store_ (one per hash server)
  std::map<std::string, Drain> drains_;
  Refills refills_;
  uint64_t next_purge_id_ = 0;       // from the wall clock at start-up: ids are not reused
  std::vector<uint8_t> push_bytes_;  // encoded_push()
  uint64_t push_bytes_version_ = 0;
  uint64_t refused_name_held_ = 0;
  uint64_t auth_refused_ = 0;  // node links that did not prove the cluster key

  // The control plane (several config servers, one store).
  std::string standby_reason() const;
  // store_.commit / set_pending_purges, timed for status and /metrics.
  std::string store_write(const std::function<std::string()>& write);
  std::string name_;
  ControlPlaneHooks hooks_;
  bool leading_ = true;
  std::string standby_why_;  // why it does not lead (as a standby)
  cluster::TakeoverHold takeover_;
  // Heartbeats are counted as missed only while this config server was reading them: after a
  // turn of its loop that stalled (a slow store write), each node's window starts again.
  int64_t last_tick_ns_ = 0;
  int64_t listening_since_ns_ = 0;
  uint64_t store_writes_ = 0;
  uint64_t store_write_errors_ = 0;
  double store_last_ms_ = 0;
  double store_total_ms_ = 0;
  // How late heartbeats are handled (Heartbeat::sent_us to now), as a histogram of these bounds
  // (seconds).
  inline static const std::vector<double> kHeartbeatLagBounds{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  std::vector<uint64_t> heartbeat_lag_counts_;
  double heartbeat_lag_sum_s_ = 0;
  uint64_t heartbeats_ = 0;
};

}  // namespace imhash
