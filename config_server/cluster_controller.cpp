// ClusterController: node links (registration, trust, versions), the tick (DOWN, LAGGING, the
// settle window) and table changes (the push-size check, the takeover hold, the push). The moves
// are in cluster_controller_moves.cpp, the admin table edits in cluster_controller_edits.cpp.
#include "config_server/cluster_controller.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/codec/endpoint.h"
#include "common/codec/printable.h"

namespace json = boost::json;

namespace imhash::cluster {

using control::StreamAction;
using frame::PurgeAction;

namespace {

// Why a registration is refused, or "". A hash server's address is what login servers dial, so it
// must be one they can: HOST:PORT as a table holds it, and not an unspecified address (a login
// server dialling 0.0.0.0 or :: reaches itself). A login server's address is only shown.
std::string registration_problem(const control::Register& reg) {
  if (reg.role != Role::kHash) return {};
  if (std::string problem = check_host_port(reg.address); !problem.empty()) {
    return "hash server " + reg.name + " registered the address " + quoted_value(reg.address) +
           ", which " + problem;
  }
  if (is_unspecified_address(reg.address)) {
    return "hash server " + reg.name + " registered " + reg.address +
           ", an unspecified address login servers cannot dial; start it with --advertise "
           "HOST:PORT (the address login servers reach it at)";
  }
  return {};
}

std::shared_ptr<const std::vector<uint8_t>> encode_push(const Table& table, const Table* previous,
                                                        uint64_t grace_ms) {
  control::TablePush p;
  p.table = table;
  if (previous) p.previous = *previous;
  p.grace_ms = grace_ms;
  auto framed = std::make_shared<std::vector<uint8_t>>();
  control::append_message(p, *framed);
  return framed;
}

}  // namespace

ClusterController::ClusterController(ControllerSettings settings, uint64_t first_purge_id,
                                     PeerOf peer_of)
    : settings_(std::move(settings)),
      peer_of_(std::move(peer_of)),
      registry_(settings_.heartbeat_ns * settings_.missed_heartbeats_down),
      next_purge_id_(first_purge_id) {}

void ClusterController::load(StoredState state, Now now, bool takeover) {
  registry_.clear();
  closing_.clear();
  drains_.clear();
  refills_ = Refills{};
  deferred_refills_.clear();
  takeover_.clear();
  router_.reset();
  if (state.current) router_ = Router::compile(*state.current);
  previous_ = std::move(state.previous);
  push_bytes_.reset();
  ever_members_ = std::move(state.ever_members);
  // Pending purges survive a restart; each waits for a fresh stream report from its server.
  pending_ = std::move(state.pending);
  // The nodes find the new leader within their reconnect back-off (at most 2 s after it leads)
  // and a DOWN window: until then a table change would miss the ones not back yet (they would
  // answer and ask with different tables), and a pending purge must not go out because the nodes
  // it waits for are merely unknown here. A first table (version 0) has nobody to wait for.
  if (takeover) takeover_.on_lead(version(), now.steady_ns, down_after_ns());
  serving_ = true;
}

Actions ClusterController::step_down() {
  Out out;
  for (auto& [key, n] : registry_.nodes()) {
    if (const LinkId link = open_link(n)) {
      out.actions.push_back(LabelLink{link, ""});
      close(link, out);
    }
  }
  registry_.clear();
  closing_.clear();
  takeover_.clear();
  drains_.clear();
  refills_ = Refills{};
  deferred_refills_.clear();
  pending_.clear();  // the leader's now: a standby shows none (nor alerts on them)
  serving_ = false;
  return std::move(out.actions);
}

// ---------------------------------------------------------------------------------------------
// Node links

LinkId ClusterController::open_link(const Node& n) const {
  return n.link != 0 && !closing_.contains(n.link) ? n.link : 0;
}

void ClusterController::refuse(LinkId link, std::string why, std::string leader_node, Out& out) {
  out.actions.push_back(RefuseLink{link, control::Refused{std::move(why), std::move(leader_node)}});
  closing_.insert(link);
}

void ClusterController::close(LinkId link, Out& out) {
  out.actions.push_back(CloseLink{link});
  closing_.insert(link);
}

Actions ClusterController::on_message(LinkId link, const control::Message& m, Now now) {
  Out out;
  if (const auto* reg = std::get_if<control::Register>(&m)) {
    on_register(link, *reg, now, out);
    return std::move(out.actions);
  }
  Node* found = registry_.on_link(link);
  if (!found) {
    out.log(LogLevel::kWarn,
            fmt::format("node link {}: message before register; closing", peer_of_(link)));
    close(link, out);
    return std::move(out.actions);
  }
  Node& n = *found;
  if (registry_.on_heard(n, now.steady_ns)) {
    // Back from DOWN on its old link (frozen, or cut off for a while): treated as a node that
    // registered again.
    out.log(LogLevel::kInfo, fmt::format("{} is up again", n.key().text()));
    on_rejoin(n, out);
  }
  if (const auto* hb = std::get_if<control::Heartbeat>(&m)) {
    on_heartbeat(n, *hb, now, out);
  } else if (const auto* ack = std::get_if<control::Ack>(&m)) {
    if (take_version(n, VersionSource::kAck, ack->version, now, out)) check_convergence(now, out);
  } else if (const auto* rep = std::get_if<control::PurgeReport>(&m)) {
    if (record_purge_report(n, *rep)) {
      out.log(LogLevel::kInfo,
              fmt::format("{}: stale records purged (purge {}); it may be added back", n.name,
                          n.rejoin_purge_id));
      n.rejoin_purge_id = 0;
    }
  } else if (const auto* stream = std::get_if<control::StreamReport>(&m)) {
    on_stream_report(n, *stream, now, out);
  }
  return std::move(out.actions);
}

void ClusterController::on_register(LinkId link, const control::Register& reg, Now now, Out& out) {
  const NodeKey key{reg.role, reg.name};
  const std::string key_text = key.text();
  if (std::string why = registration_problem(reg); !why.empty()) {
    // Refused before it touches the registry: a node of that name already registered keeps its
    // entry. The node logs the reason and tries again after its back-off.
    out.log(LogLevel::kError,
            fmt::format("{} from {}: registration refused: {}", key_text, peer_of_(link), why));
    refuse(link, std::move(why), "", out);
    return;
  }
  if (const Node* on_link = registry_.on_link(link); on_link && on_link->key() != key) {
    out.log(LogLevel::kWarn, fmt::format("node link {}: registered as {}, now as {}; closing",
                                         peer_of_(link), on_link->key().text(), key_text));
    close(link, out);
    return;
  }
  if (std::string why = name_held(key, link); !why.empty()) {
    // The live holder keeps its link; the newcomer tries again after its back-off, and takes the
    // name over once the holder's link has closed or it is DOWN.
    ++refused_name_held_;
    out.log(LogLevel::kWarn,
            fmt::format("{} from {}: registration refused: {}", key_text, peer_of_(link), why));
    refuse(link, std::move(why), "", out);
    return;
  }
  const uint64_t latest = version();
  const Node* before = registry_.find(key);
  const LinkId older = before && before->link != link ? open_link(*before) : 0;
  const NodeRegistry::Registration r = registry_.on_register(reg, link, now.steady_ns, latest);
  Node& n = r.node;
  if (older) {
    out.log(LogLevel::kWarn,
            fmt::format("{} registered again from {}: dropping its older link ({}, {})", key_text,
                        peer_of_(link), peer_of_(older), r.was_up ? "closed" : "DOWN"));
    out.actions.push_back(LabelLink{older, ""});
    close(older, out);
  }
  note_version(n, VersionSource::kRegister, reg.version, r.version, latest, now, out);
  out.actions.push_back(LabelLink{link, key_text});
  out.log(LogLevel::kInfo, fmt::format("{} {} at {} (pid {}, version {}){}",
                                       r.was_up ? "re-registered" : "registered", key_text,
                                       n.address, n.pid, n.version, r.was_up ? "" : ": up"));
  if (takeover_.on_node_runs(reg.version, latest)) {
    release_held_version("a node registered with it", now, out);
  }
  // The version it is to run: while one is held back (holds_push), the one it has, so that a
  // starting login server does not wait for a table that is not coming yet.
  const uint64_t serving = holds_push(n) ? n.version : latest;
  out.send(link,
           control::Welcome{static_cast<uint32_t>(settings_.heartbeat_ns / 1'000'000), serving});
  on_rejoin(n, out);
  // A node that says it runs a newer version than any pushed gets no push (nodes ignore older
  // tables); it shows at version 0, lagging once the DOWN window has passed.
  if (router_ && reg.version < latest && !holds_push(n)) push(n, now, out);
  if (n.is_hash()) maybe_refill(n, reg.fresh, reg.filling, now, out);
}

void ClusterController::on_heartbeat(Node& n, const control::Heartbeat& hb, Now now, Out& out) {
  // A version above the latest pushed is not trusted for convergence; a lower one does not lower
  // what the node acknowledged (heartbeats and acks may cross).
  take_version(n, VersionSource::kHeartbeat, hb.version, now, out);
  if (hb.sent_us != 0) {
    const double lag_s =
        now.unix_us > hb.sent_us ? static_cast<double>(now.unix_us - hb.sent_us) / 1e6 : 0;
    heartbeat_lag_.record(lag_s);
  }
  ++heartbeats_;
  n.stats = hb.stats;
  n.held_writes = hb.held_writes;
  n.heartbeat_ns = now.steady_ns;
  if (!n.is_hash()) end_caught_up_refills(now, out);  // they may wait for its held writes
  NodeRegistry::update_rate(n, now.steady_ns);
  // A node behind the current version missed a push (or asks for the table after a MOVED): push
  // again, at most once per heartbeat interval.
  if (takeover_.on_node_runs(hb.version, version())) {
    release_held_version("a node runs it", now, out);
  } else if (takeover_.on_node_runs(hb.seen_version, version())) {
    // A hash server runs it (it answered this login server MOVED with it): the dying leader
    // pushed it to some nodes, and those on the older table park every request they send there
    // (a nemesis run: a leader cut off just after a drain; one login server on the table before
    // for 2 s, 2,278 UNAVAILABLEs).
    release_held_version("a hash server runs it", now, out);
  }
  if (router_ && hb.version < router_->version() && !holds_push(n) &&
      now.steady_ns - n.last_push_ns > settings_.heartbeat_ns) {
    push(n, now, out);
  }
}

void ClusterController::on_stream_report(Node& n, const control::StreamReport& report, Now now,
                                         Out& out) {
  const bool first = !n.stream;
  if (first || n.stream->state != report.state || n.stream->version != report.version) {
    out.log(LogLevel::kInfo,
            fmt::format("{}: stream {} at version {} ({} records sent)", n.key().text(),
                        control::stream_state_name(report.state), report.version, report.sent));
  }
  n.stream = report;
  n.stream_heard_ns = now.steady_ns;
  for (const std::string& refilled : refills_.on_report(n.name, report, now.steady_ns)) {
    streams_done(refilled, "every other replica has streamed to it", now, out);
  }
  // Its first report since it registered says it knows streams (see streams_known): the stream
  // on_rejoin could not start yet starts now.
  if (first && n.is_hash() && router_ && !n.rejoin_purge_id) {
    if (const PendingPurge* p = pending_for(n.name); p && needs_stream(n, *p, version())) {
      send_stream(n, StreamAction::kStart, version(), out);
    }
  }
  maybe_auto_purge(now, out);
}

Actions ClusterController::on_link_closed(LinkId link) {
  closing_.erase(link);
  const Node* n = registry_.on_link(link);
  if (!n) return {};
  Out out;
  out.log(LogLevel::kInfo, fmt::format("{} disconnected", n->key().text()));
  registry_.on_link_closed(link);
  return std::move(out.actions);
}

std::string ClusterController::name_held(const NodeKey& key, LinkId asking) const {
  const Node* held = registry_.find(key);
  if (!held || !registry_.name_held(key, asking, open_link(*held) != 0)) return {};
  return "the name " + held->name + " is held by a live " + to_string(held->role) +
         " server connected from " + peer_of_(held->link) +
         "; a second connection cannot take it over (stop that server, or give this one another "
         "--name)";
}

bool ClusterController::take_version(Node& n, VersionSource from, uint64_t version, Now now,
                                     Out& out) {
  const uint64_t latest = this->version();
  const VersionTaken taken = registry_.take_version(n, from, version, latest);
  note_version(n, from, version, taken, latest, now, out);
  return taken != VersionTaken::kRejected;
}

void ClusterController::note_version(Node& n, VersionSource from, uint64_t version,
                                     VersionTaken taken, uint64_t latest, Now now, Out& out) {
  if (taken == VersionTaken::kCaughtUp) {
    out.log(LogLevel::kInfo, fmt::format("{} caught up: version {}", n.key().text(), n.version));
  }
  if (taken != VersionTaken::kRejected || !NodeRegistry::log_rejection(n, now.steady_ns)) return;
  out.log(LogLevel::kWarn,
          fmt::format("{} ({}): {} of version {} rejected: the latest version pushed is {}; it "
                      "stays at version {}",
                      n.key().text(), peer_of_(n.link), version_source_name(from), version, latest,
                      n.version));
}

// ---------------------------------------------------------------------------------------------
// The tick

Actions ClusterController::tick(Now now) {
  Out out;
  // Ticks come every half interval; one a whole interval late means the loop stalled, and the
  // heartbeats that arrived meanwhile are still unread in the sockets.
  const int64_t interval = settings_.heartbeat_ns;
  const int64_t since_last = now.steady_ns - last_tick_ns_;
  const bool stalled = last_tick_ns_ != 0 && since_last > interval + interval / 2;
  last_tick_ns_ = now.steady_ns;
  if (!serving_) return {};
  if (takeover_.on_tick(now.steady_ns)) release_held_version("the settle window ended", now, out);
  retry_deferred_refills(now, out);
  if (stalled) {
    out.log(LogLevel::kWarn,
            fmt::format("config server {}: its loop stalled for {} ms: missed heartbeats count "
                        "from now",
                        settings_.name, since_last / 1'000'000));
    listening_since_ns_ = now.steady_ns;
  }
  on_servers_down(registry_.mark_down(now.steady_ns, listening_since_ns_), now, out);
  if (router_) {
    for (const NodeKey& key : registry_.mark_lagging(now.steady_ns, router_->version())) {
      const Node* n = registry_.find(key);
      out.log(LogLevel::kWarn,
              fmt::format("{} is LAGGING: version {} not acknowledged within {} ms (it runs {}); "
                          "convergence and the automatic purge no longer wait for it",
                          key.text(), router_->version(), down_after_ns() / 1'000'000,
                          n ? n->version : 0));
    }
  }
  end_caught_up_refills(now, out);
  check_convergence(now, out);
  maybe_auto_purge(now, out);
  extend_grace(now, out);
  return std::move(out.actions);
}

void ClusterController::extend_grace(Now now, Out& out) {
  // A grace period shorter than the streams read users not yet streamed to their new owner as
  // NOT_FOUND once it ended (a CI run under ASan: a failover's streams took 1.05 s of a 1 s grace
  // period).
  if (!router_ || !previous_ || settings_.grace_ms == 0) return;
  if (grace_version_ != router_->version()) {
    grace_version_ = router_->version();
    grace_pushed_ns_ = now.steady_ns;
    grace_extended_ = false;
    return;
  }
  const auto half = static_cast<int64_t>(settings_.grace_ms) * 500'000;
  if (now.steady_ns - grace_pushed_ns_ < half ||
      !streams_running(*previous_, router_->table(), registry_, router_->version())) {
    return;
  }
  grace_pushed_ns_ = now.steady_ns;
  size_t pushed = 0;
  for (auto& [key, n] : registry_.nodes()) {
    if (n.is_hash() || !n.up || n.version != router_->version()) continue;
    if (const LinkId link = open_link(n)) {
      out.actions.push_back(SendTable{link, encoded_push()});
      ++pushed;
    }
  }
  if (!grace_extended_ && pushed > 0) {
    grace_extended_ = true;
    out.log(LogLevel::kInfo,
            fmt::format("version {}: its streams still run after half its grace period: the "
                        "login servers' grace period goes on until they are done",
                        router_->version()));
  }
}

void ClusterController::on_servers_down(const std::vector<NodeKey>& down, Now now, Out& out) {
  for (const NodeKey& key : down) {
    out.log(LogLevel::kWarn, fmt::format("{} is DOWN: {} heartbeats missed", key.text(),
                                         settings_.missed_heartbeats_down));
    if (key.role != Role::kHash) continue;
    // A refill waits for nothing more from it; its own refill starts over when it is back.
    refills_.cancel(key.name);
    for (const std::string& refilled : refills_.drop_peer(key.name, now.steady_ns)) {
      streams_done(refilled, "the other replicas that are up have streamed to it", now, out);
    }
    if (Node* n = registry_.find(key); n && settings_.failover_auto) failover(*n, now, out);
  }
}

void ClusterController::check_convergence(Now now, Out& out) {
  if (!router_ || registry_.convergence_version() != router_->version()) return;
  if (const std::optional<double> ms = registry_.check_convergence(now.steady_ns)) {
    out.log(LogLevel::kInfo,
            fmt::format("version {} reached every node in {:.1f} ms", router_->version(), *ms));
  }
}

// ---------------------------------------------------------------------------------------------
// Table changes

std::shared_ptr<const std::vector<uint8_t>> ClusterController::encoded_push() {
  if (!push_bytes_) {
    push_bytes_ =
        encode_push(router_->table(), previous_ ? &*previous_ : nullptr, settings_.grace_ms);
  }
  return push_bytes_;
}

bool ClusterController::holds_push(const Node& n) const {
  return router_ && takeover_.holds_push(n.version, router_->version());
}

void ClusterController::release_held_version(const char* why, Now now, Out& out) {
  if (!router_) return;
  size_t pushed = 0;
  for (auto& [key, n] : registry_.nodes()) {
    if (n.up && n.version < router_->version()) {
      push(n, now, out);
      ++pushed;
    }
  }
  out.log(LogLevel::kInfo, fmt::format("config server {}: version {} to every node now ({}): "
                                       "pushed to {}",
                                       settings_.name, router_->version(), why, pushed));
}

void ClusterController::push(Node& n, Now now, Out& out) {
  const LinkId link = open_link(n);
  if (!link || !router_) return;
  out.actions.push_back(SendTable{link, encoded_push()});
  NodeRegistry::on_pushed(n, now.steady_ns, router_->version());
}

Change ClusterController::plan_change(TableResult next, const std::string& change, Now now) {
  if (!next.table) return Outcome{AdminResult::error(400, next.error), {}};
  if (const int64_t left = settling_ns(now); left > 0) {
    return Outcome{AdminResult::error(
                       503, "this config server has just taken over and waits " +
                                format_ms(static_cast<uint64_t>(left / 1'000'000)) +
                                " more for the nodes to register with it, so that none misses a "
                                "change; try again then"),
                   {}};
  }
  ChangePlan plan;
  plan.table = std::move(*next.table);
  plan.table.version = version() + 1;
  plan.change = change;
  const Table* previous = router_ ? &router_->table() : nullptr;
  // Every node gets the new table and the one before it in one control message: one that does
  // not fit would be refused by every node, so the change is refused before it is written.
  plan.push = encode_push(plan.table, previous, settings_.grace_ms);
  if (const size_t size = plan.push->size() - control::kLengthPrefixSize;
      size > control::kMaxMessageSize) {
    std::string why = "the new table cannot be pushed: with the table before it, it takes " +
                      std::to_string(size) + " bytes, above the control message limit of " +
                      std::to_string(control::kMaxMessageSize) +
                      " bytes; nothing was changed (fewer ranges or servers make it smaller)";
    Out out;
    out.log(LogLevel::kError, fmt::format("{}: refused: {}", change, why));
    return Outcome{AdminResult::error(413, std::move(why)), std::move(out.actions)};
  }
  // Every server of the table before may hold ids it no longer owns: one pending purge each (a
  // newer change replaces a server's older entry; entries of servers not in that table stay).
  plan.pending = pending_;
  if (previous && settings_.auto_purge) {
    const uint64_t not_before = now.unix_ms() + settings_.grace_ms;
    for (const auto& s : previous->servers) {
      const Node* n = hash_node(s.name);
      PendingPurge entry{s.name, plan.table.version, not_before,
                         n && n->up && n->link && !n->rejoin_purge_id && n->streams_known()};
      auto it = std::find_if(plan.pending.begin(), plan.pending.end(),
                             [&](const PendingPurge& p) { return p.server == s.name; });
      if (it == plan.pending.end()) {
        plan.pending.push_back(std::move(entry));
      } else {
        *it = std::move(entry);
      }
    }
  }
  return plan;
}

Outcome ClusterController::on_committed(ChangePlan plan, const std::string& error, Now now) {
  Out out;
  if (!error.empty()) {
    out.log(LogLevel::kError,
            fmt::format("cannot persist version {}: {}", plan.table.version, error));
    return {AdminResult::error(503, "cannot persist the new table: " + error),
            std::move(out.actions)};
  }
  // The table before it goes with every push of it from now on, and says who streams (one copy:
  // a range table may be megabytes).
  previous_ = router_ ? std::optional<Table>(router_->table()) : std::nullopt;
  pending_ = std::move(plan.pending);
  router_ = Router::compile(plan.table);
  for (const ServerInfo& s : plan.table.servers) ever_members_.insert(s.name);
  push_bytes_ = std::move(plan.push);
  const Table& t = router_->table();
  out.log(LogLevel::kInfo, fmt::format("version {}: {}", t.version, plan.change));
  registry_.start_convergence(t.version, now.steady_ns);
  for (auto& [key, n] : registry_.nodes()) push(n, now, out);
  // Ids moved: every hash server of the table before, and every one not in the new table (it may
  // hold records), streams what it holds that others now own. Not one that is DOWN (a server
  // removed while DOWN purges everything when it comes back) or purging everything.
  if (previous_) {
    for (auto& [key, n] : registry_.nodes()) {
      if (!n.is_hash() || !n.up || !n.link || n.rejoin_purge_id || !n.streams_known()) continue;
      if (previous_->server_index(n.name) >= 0 || t.server_index(n.name) < 0) {
        send_stream(n, StreamAction::kStart, t.version, out);
      }
    }
  }
  update_refills(now, out);
  check_convergence(now, out);
  if (!plan.drained.empty()) {
    drains_[plan.drained] = Drain{t.version, false};
    if (!settings_.auto_purge) {
      out.log(LogLevel::kWarn, fmt::format("drain {}: the automatic purge is off: purge it by hand "
                                           "once its stream is done",
                                           plan.drained));
    }
  }
  // The table itself is the adapter's to show (ConfigService::table_value), as every admin view.
  return {AdminResult::ok(json::object{{"version", t.version}, {"change", plan.change}}),
          std::move(out.actions)};
}

uint64_t ClusterController::replication_lag(const std::string& server) const {
  // What the login servers that heartbeat hold for it; a DOWN login server's holds are out of
  // date (and lost with it if it died).
  uint64_t held = 0;
  for (const auto& [key, n] : registry_.nodes()) {
    if (n.is_hash() || !n.up) continue;
    if (const auto it = n.held_writes.find(server); it != n.held_writes.end()) held += it->second;
  }
  return held;
}

PurgeWaits ClusterController::purge_waits(const PendingPurge& p, Now now) const {
  return cluster::purge_waits(p, registry_, now.unix_ms(), settling_ns(now));
}

}  // namespace imhash::cluster
