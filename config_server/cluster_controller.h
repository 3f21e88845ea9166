// ClusterController: the config server's rules as one core (docs/design.md §5). Events go in — a
// node's message on a link, a link closed, a tick, an admin command, the result of a store write,
// leading or standing by — each with the time it happened (cluster::Now); actions come out
// (config_server/controller_actions.h): send to or close link N, label a link, write the pending
// purges, write a table change, a log record. ConfigService, its adapter, owns the sockets, the
// timer, the store and the log, performs the actions in order and shows the state (admin views,
// /metrics) through the const accessors here.
//
// Its parts, by job: the node registry (cluster::NodeRegistry: registration, trust, DOWN,
// LAGGING, convergence); table changes (plan_change / on_committed: the push-size check, the
// takeover hold of cluster::TakeoverHold, one pending purge per old owner, the push to every
// node); and the moves (cluster_controller_moves.cpp: streams, purges and their three conditions
// in move_rules.h, drains, failover, the refills of Refills).
//
// A table change is two events: plan_change() decides (or refuses) and returns the plan; the
// adapter writes it to the store, synchronously on the main thread, and hands the result to
// on_committed(), which pushes it. Nothing else runs in between, so what the plan was decided on
// still holds; a slow store stalls the loop, and tick() then counts missed heartbeats from the end
// of the stall (docs/design.md §5).
//
// A core: no socket, no clock, no log; common/codec/core_only.h makes a use of any of them here
// a compile error. Not thread-safe: the config server's main thread only.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <variant>
#include <vector>

#include "admin_api/admin_contract.h"
#include "common/codec/histogram.h"
#include "common/routing/control_protocol.h"
#include "common/routing/router.h"
#include "common/routing/table.h"
#include "config_server/controller_actions.h"
#include "config_server/move_rules.h"
#include "config_server/node_registry.h"
#include "config_server/pending_purge.h"
#include "config_server/refills.h"
#include "config_server/table_edits.h"
#include "config_server/takeover_hold.h"

namespace imhash::cluster {

struct ControllerSettings {
  int64_t heartbeat_ns = 1'000'000'000;
  uint32_t missed_heartbeats_down = 3;
  uint64_t grace_ms = 60'000;  // fallback reads at the previous owner after a change
  bool failover_auto = false;
  bool auto_purge = true;
  RoutingMode initial_mode = RoutingMode::kRing;
  std::string name;  // this config server's, for its log records ("" alone)
};

// What the store holds, as the controller starts from it (at start-up, or when elected).
struct StoredState {
  std::optional<Table> current;
  std::optional<Table> previous;  // the version before current (pushed with it)
  std::vector<PendingPurge> pending;
  std::set<std::string> ever_members;  // every hash server some version of the table had
};

// An admin command that writes nothing: its answer, and what to do.
struct Outcome {
  AdminResult answer;
  Actions actions;
};

// An admin command that changes the table: answered at once (refused, or nothing to change), or a
// plan to write.
using Change = std::variant<Outcome, ChangePlan>;

// A server being drained (imctl drain): out of the table at `version`; `purged` once its automatic
// purge (or a purge of everything) was sent.
struct Drain {
  uint64_t version = 0;
  bool purged = false;
};

class ClusterController {
 public:
  // The remote address of an open node link ("" if it is not open), for the log records and
  // refusals that name one. The adapter owns the links and answers from them, so the controller
  // keeps no copy per node; called only where a record names a link, never per message.
  using PeerOf = std::function<std::string(LinkId)>;

  // `first_purge_id`: purge ids count up from it (the adapter seeds it from the wall clock, so
  // that ids are not reused after a restart).
  ClusterController(ControllerSettings settings, uint64_t first_purge_id, PeerOf peer_of);

  // This config server's name, for the log records (once known).
  void set_name(std::string name) { settings_.name = std::move(name); }
  // Starts from the store's state; `takeover` when elected (cluster::TakeoverHold: changes and
  // automatic purges wait for the nodes to register, and a version no node runs may be held).
  // Forgets every node, drain and refill.
  void load(StoredState state, Now now, bool takeover);
  // Standing by: every node link is closed and every node, drain, refill and pending purge
  // forgotten (the leader's now); ticks do nothing until load() again.
  Actions step_down();

  // Node links.
  Actions on_message(LinkId link, const control::Message& m, Now now);
  Actions on_link_closed(LinkId link);
  // Every half heartbeat interval: DOWN, LAGGING, the end of the settle window, refills that have
  // caught up, convergence, automatic purges.
  Actions tick(Now now);

  // Admin commands that change the table.
  Change set_mode(RoutingMode mode, std::optional<ModuloHash> modulo_hash, Now now);
  Change set_replicas(uint32_t replicas, Now now);
  Change add_servers(const std::vector<ServerSpec>& servers, Now now);
  Change set_server(const std::string& name, const std::optional<std::string>& address,
                    const std::optional<uint32_t>& weight, Now now);
  Change remove_servers(const std::vector<std::string>& names, Now now);
  Change assign(uint64_t lo, uint64_t hi, const std::string& server, Now now);
  Change split(uint64_t at, Now now);
  Change merge(uint64_t lo, uint64_t hi, Now now);
  // imctl drain: out of the table by streaming; again while drained, how far it is.
  Change drain(const std::string& server, Now now);
  // The store's answer to a plan (`error` empty: written): pushes it, or says it failed.
  Outcome on_committed(ChangePlan plan, const std::string& error, Now now);

  // Admin commands that send.
  Outcome purge(const std::string& server, frame::PurgeAction kind, uint32_t age_seconds);
  Outcome stream_control(const std::string& server, StreamControl action);

  // The state, for the admin views and /metrics (const: views only).
  const NodeRegistry& registry() const { return registry_; }
  const std::shared_ptr<const Router>& router() const { return router_; }
  uint64_t version() const { return router_ ? router_->version() : 0; }
  const std::vector<PendingPurge>& pending() const { return pending_; }
  const std::map<std::string, Drain>& drains() const { return drains_; }
  const Refills& refills() const { return refills_; }
  // Servers back empty that wait for a replica of theirs to register before they are refilled,
  // by when that began (steady ns).
  const std::map<std::string, int64_t>& deferred_refills() const { return deferred_refills_; }
  const ControllerSettings& settings() const { return settings_; }
  int64_t down_after_ns() const {
    return settings_.heartbeat_ns * settings_.missed_heartbeats_down;
  }
  // After a takeover, how long (ns) changes and automatic purges still wait (0: they do not).
  int64_t settling_ns(Now now) const { return takeover_.settling_left(now.steady_ns); }
  // What the pending purge `p` still waits for, in words (empty: it may be sent).
  PurgeWaits purge_waits(const PendingPurge& p, Now now) const;
  // Every node that is up and not LAGGING runs the current version.
  bool converged() const { return router_ && registry_.converged(router_->version()); }
  // Writes the login servers that are up hold for hash server `server` (NodeRecord::held_writes).
  uint64_t replication_lag(const std::string& server) const;
  // Whether the hash server `name` is in some version of the table.
  bool was_ever_member(const std::string& name) const { return ever_members_.count(name) != 0; }
  const NodeRecord* find_hash(const std::string& name) const {
    return registry_.find({Role::kHash, name});
  }
  uint64_t refused_name_held() const { return refused_name_held_; }
  // The login servers that are up and hold writes for `server`, or have not heartbeat since
  // `since_ns` plus a sample period (a refill waits for them).
  std::vector<std::string> logins_holding(const std::string& server, int64_t since_ns) const;

  // How late heartbeats are handled (Heartbeat::sent_us to the time it is read), in seconds.
  static constexpr std::array<double, 13> kHeartbeatLagBounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  const Histogram<kHeartbeatLagBounds>& heartbeat_lag() const { return heartbeat_lag_; }
  uint64_t heartbeats() const { return heartbeats_; }

 private:
  using Node = NodeRecord;
  // What one event asks for, gathered as the rules run.
  struct Out {
    Actions actions;
    void log(LogLevel level, std::string text) {
      actions.push_back(LogRecord{level, std::move(text)});
    }
    void send(LinkId link, control::Message m) {
      actions.push_back(SendMessage{link, std::move(m)});
    }
  };
  void on_register(LinkId link, const control::Register& reg, Now now, Out& out);
  void on_heartbeat(Node& n, const control::Heartbeat& hb, Now now, Out& out);
  void on_stream_report(Node& n, const control::StreamReport& report, Now now, Out& out);
  void refuse(LinkId link, std::string why, std::string leader_node, Out& out);
  void close(LinkId link, Out& out);
  // The link `n` registered on, if it is open and not told to close (0: none).
  LinkId open_link(const Node& n) const;
  // The registration is refused because `key` is held by a live link ("" if it may go ahead).
  std::string name_held(const NodeKey& key, LinkId asking) const;
  // A register, heartbeat or ack names `version`: recorded unless it is above the latest version
  // pushed (then rejected: logged at most once a second a node, and counted; false).
  bool take_version(Node& n, VersionSource from, uint64_t version, Now now, Out& out);
  void note_version(Node& n, VersionSource from, uint64_t version, VersionTaken taken,
                    uint64_t latest, Now now, Out& out);

  // Table changes.
  Change plan_change(TableResult next, const std::string& change, Now now);
  std::shared_ptr<const std::vector<uint8_t>> encoded_push();
  void push(Node& n, Now now, Out& out);
  bool holds_push(const Node& n) const;
  // The version held back since the takeover goes to every node that is behind, now (`why`).
  void release_held_version(const char* why, Now now, Out& out);
  void check_convergence(Now now, Out& out);

  // Moves (cluster_controller_moves.cpp).
  // A hash server that registered or came back from DOWN: purge everything if it was removed
  // while it could not stream; else, if a purge is pending for it, stream again first.
  void on_rejoin(Node& n, Out& out);
  // Sends a purge with a fresh id and returns the id (0 if the node is not connected).
  uint64_t send_purge(Node& n, frame::PurgeAction action, uint32_t age_seconds, Out& out);
  void send_stream(Node& n, control::StreamAction action, uint64_t version, Out& out);
  void save_pending(const char* why, Out& out);
  PendingPurge* pending_for(const std::string& server);
  void failover(Node& n, Now now, Out& out);
  // Replicas: a hash server of the table that registered empty (`fresh`) or with a refill not
  // complete (`filling`) is refilled by the others (config_server/refills.h).
  void maybe_refill(Node& n, bool fresh, bool filling, Now now, Out& out);
  // Tells a server it is refilled (or that nobody can refill it): it answers NOT_FOUND again.
  void end_refill(const std::string& server, const char* why, bool refilled, Out& out);
  // The peers of `server` have streamed to it (`why`): its refill ends once the login servers
  // have sent it what they held for it (maybe_end_refill).
  void streams_done(const std::string& server, const char* why, Now now, Out& out);
  // Ends the refill of `server` if its streams are done and no login server that is up still
  // holds writes for it (or has not said since the refill started), or after a patience.
  void maybe_end_refill(const std::string& server, Now now, Out& out);
  void end_caught_up_refills(Now now, Out& out);
  // After a table change: refills of servers (or from peers) the table no longer has, or all of
  // them when it has no replicas, are over.
  void update_refills(Now now, Out& out);
  void maybe_auto_purge(Now now, Out& out);
  // While the streams of the latest version run (cluster::streams_running), the login servers
  // that run it get it again every half grace period: each push of the version a login server
  // runs extends the grace period of the tables it replaced (TableSource::install), so a record
  // not yet streamed to its new owner is still read at its earlier one.
  void extend_grace(Now now, Out& out);
  void on_servers_down(const std::vector<NodeKey>& down, Now now, Out& out);
  Node* hash_node(const std::string& name) { return registry_.find({Role::kHash, name}); }

  ControllerSettings settings_;
  PeerOf peer_of_;
  NodeRegistry registry_;
  TakeoverHold takeover_;
  // Links told to close (refused, or replaced) whose close has not been reported yet: nothing
  // more is sent on them, and the name of a node on one is not held by it.
  std::unordered_set<LinkId> closing_;
  std::shared_ptr<const Router> router_;
  std::optional<Table> previous_;  // the version before the router's, pushed with it
  std::shared_ptr<const std::vector<uint8_t>> push_bytes_;  // encoded_push(), of router_'s version
  std::set<std::string> ever_members_;
  std::vector<PendingPurge> pending_;  // as in the store (one per hash server)
  std::map<std::string, Drain> drains_;
  Refills refills_;
  // Hash servers that came back empty with no replica of theirs registered here to refill them
  // from (one just elected hears from the others within seconds; a leader that was isolated,
  // later still), by the time that was found: kept filling (their reads go to other copies)
  // until a replica registers and refills them, or kNoReplicaPatienceNs has passed (then all
  // other copies are taken to be gone, and they serve what they have).
  std::map<std::string, int64_t> deferred_refills_;
  static constexpr int64_t kNoReplicaPatienceNs = 30'000'000'000;
  // The hash servers that can refill `n`: up, linked, in the table, their streams known.
  std::vector<std::string> refill_peers(const Node& n) const;
  void retry_deferred_refills(Now now, Out& out);
  uint64_t next_purge_id_ = 0;
  uint64_t refused_name_held_ = 0;
  // Heartbeats are counted as missed only while this config server was reading them: after a
  // turn of its loop that stalled (a slow store write), each node's window starts again.
  int64_t last_tick_ns_ = 0;
  // extend_grace: the version whose grace period it keeps, and when it last pushed it (or first
  // saw it, on a tick).
  uint64_t grace_version_ = 0;
  int64_t grace_pushed_ns_ = 0;
  bool grace_extended_ = false;  // logged once a version
  bool serving_ = true;          // false from step_down() to load()
  int64_t listening_since_ns_ = 0;
  Histogram<kHeartbeatLagBounds> heartbeat_lag_;
  uint64_t heartbeats_ = 0;
};

}  // namespace imhash::cluster
