#include "config_server/config_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/endpoint.h"
#include "common/metrics.h"
#include "common/printable.h"
#include "common/table_edits.h"
#include "common/table_json.h"
#include "common/table_text.h"

namespace asio = boost::asio;
namespace json = boost::json;

namespace imhash {

using control::purge_action_name;
using control::purge_state_name;
using control::StreamAction;
using control::StreamState;
using frame::PurgeAction;

namespace {

// Why a registration is refused, or "". A hash server's address is what login servers dial, so it
// must be one they can: HOST:PORT as a table holds it, and not an unspecified address (a login
// server dialling 0.0.0.0 or :: reaches itself). A login server's address is only shown.
std::string registration_problem(const control::Register& reg) {
  if (reg.role != control::Role::kHash) return {};
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

}  // namespace

ConfigService::ConfigService(asio::io_context& ctx, StateStore& store,
                             ConfigServiceSettings settings)
    : store_(store),
      settings_(settings),
      timer_(ctx),
      registry_(std::chrono::nanoseconds(settings.heartbeat).count() *
                settings.missed_heartbeats_down) {
  thread_.bind();
  if (store_.current()) router_ = Router::compile(*store_.current());
  // Pending purges survive a restart; each waits for a fresh stream report from its server.
  pending_ = store_.pending_purges();
  next_purge_id_ = unix_millis();
}

void ConfigService::set_control_plane(std::string name, ControlPlaneHooks hooks, bool leading) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  name_ = std::move(name);
  hooks_ = std::move(hooks);
  leading_ = leading;
  if (!leading_) standby_why_ = "not elected yet";
}

std::string ConfigService::lead() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (std::string err = store_.reload(); !err.empty()) return err;
  // What the previous leader left: the table, its history and the pending purges. The nodes
  // register again, as after a restart.
  registry_.clear();
  drains_.clear();
  refills_ = Refills{};
  router_.reset();
  if (store_.current()) router_ = Router::compile(*store_.current());
  pending_ = store_.pending_purges();
  push_bytes_.clear();
  push_bytes_version_ = 0;
  leading_ = true;
  standby_why_.clear();
  // The nodes find the new leader within their reconnect back-off (at most 2 s after it leads)
  // and a DOWN window: until then a table change would miss the ones not back yet (they would
  // answer and ask with different tables), and a pending purge must not go out because the nodes
  // it waits for are merely unknown here. A first table (version 0) has nobody to wait for.
  takeover_.on_lead(store_.version(), monotonic_ns(), down_after_ns());
  spdlog::info("config server {}: serving version {} from {}", name_, store_.version(),
               store_.describe());
  return {};
}

void ConfigService::step_down(const std::string& why) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  standby_why_ = why;
  if (!leading_) return;
  leading_ = false;
  for (auto& [key, n] : registry_.nodes()) {
    if (const auto link = link_of(n)) {
      link->registered_as("");
      link->close();
    }
  }
  registry_.clear();
  takeover_.clear();
  drains_.clear();
  refills_ = Refills{};
  pending_.clear();  // the leader's now: a standby shows none (nor alerts on them)
  spdlog::warn("config server {}: standing by ({}); node links closed", name_, why);
}

std::string ConfigService::standby_reason() const {
  const std::optional<ConfigServerInfo> leader =
      hooks_.leader ? hooks_.leader() : std::optional<ConfigServerInfo>();
  const std::string me = "this config server" + (name_.empty() ? "" : " (" + name_ + ")");
  if (leader && leader->name != name_) {
    return me + " is a standby; the leader is " + leader->name + " at " + leader->admin +
           " (nodes: " + leader->node + ")";
  }
  return me + " is a standby and no leader is known: " + standby_why_;
}

std::optional<AdminResult> ConfigService::standby_answer() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (leading_) return std::nullopt;
  AdminResult r = AdminResult::error(503, standby_reason());
  const std::optional<ConfigServerInfo> leader =
      hooks_.leader ? hooks_.leader() : std::optional<ConfigServerInfo>();
  if (leader && leader->name != name_) r.body.as_object()["leader"] = leader->to_json();
  return r;
}

std::string ConfigService::store_write(const std::function<std::string()>& write) {
  const auto start = std::chrono::steady_clock::now();
  std::string err = write();
  store_last_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  store_total_ms_ += store_last_ms_;
  ++store_writes_;
  if (!err.empty()) ++store_write_errors_;
  return err;
}

void ConfigService::start() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  timer_.expires_after(settings_.heartbeat / 2);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    tick();
    start();
  });
}

void ConfigService::stop() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  timer_.cancel();
  for (auto& [key, n] : registry_.nodes()) {
    if (const auto link = link_of(n)) link->close();
  }
}

std::shared_ptr<NodeSession> ConfigService::link_of(const Node& n) const {
  if (n.link == 0) return nullptr;
  const auto it = links_.find(n.link);
  return it == links_.end() ? nullptr : it->second.lock();
}

PendingPurge* ConfigService::pending_for(const std::string& server) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const PendingPurge& p) { return p.server == server; });
  return it == pending_.end() ? nullptr : &*it;
}

// ---------------------------------------------------------------------------------------------
// Node links

void ConfigService::on_message(NodeSession& session, const control::Message& m) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const int64_t now = monotonic_ns();
  if (!leading_) {
    // A standby: the node dials the leader next (it knows its address if it was configured with
    // every config server).
    const std::optional<ConfigServerInfo> leader =
        hooks_.leader ? hooks_.leader() : std::optional<ConfigServerInfo>();
    session.send_last(
        control::Refused{standby_reason(), leader && leader->name != name_ ? leader->node : ""});
    return;
  }
  if (const auto* reg = std::get_if<control::Register>(&m)) {
    const cluster::NodeKey key{reg->role, reg->name};
    const std::string key_text = key.text();
    if (std::string why = registration_problem(*reg); !why.empty()) {
      // Refused before it touches the registry: a node of that name already registered keeps its
      // entry. The node logs the reason and tries again after its back-off.
      spdlog::error("{} from {}: registration refused: {}", key_text, session.peer(), why);
      session.send_last(control::Refused{std::move(why), ""});
      return;
    }
    if (!session.key().empty() && session.key() != key_text) {
      spdlog::warn("node link {}: registered as {}, now as {}; closing", session.peer(),
                   session.key(), key_text);
      session.close();
      return;
    }
    if (std::string why = name_held(key, session); !why.empty()) {
      // The live holder keeps its link; the newcomer tries again after its back-off, and takes
      // the name over once the holder's link has closed or it is DOWN.
      ++refused_name_held_;
      spdlog::warn("{} from {}: registration refused: {}", key_text, session.peer(), why);
      session.send_last(control::Refused{std::move(why), ""});
      return;
    }
    const uint64_t latest = router_ ? router_->version() : 0;
    Node* before = registry_.find(key);
    const std::shared_ptr<NodeSession> older =
        before && before->link != session.id() ? link_of(*before) : nullptr;
    links_[session.id()] = session.weak_from_this();
    const cluster::NodeRegistry::Registration r =
        registry_.on_register(*reg, session.id(), now, latest);
    Node& n = r.node;
    if (older) {
      spdlog::warn("{} registered again from {}: dropping its older link ({}, {})", key_text,
                   session.peer(), older->peer(), r.was_up ? "closed" : "DOWN");
      older->registered_as("");
      older->close();
    }
    note_version(n, session, cluster::VersionSource::kRegister, reg->version, r.version, latest);
    session.registered_as(key_text);
    spdlog::info("{} {} at {} (pid {}, version {}){}", r.was_up ? "re-registered" : "registered",
                 key_text, n.address, n.pid, n.version, r.was_up ? "" : ": up");
    if (takeover_.on_node_runs(reg->version, latest)) {
      release_held_version("a node registered with it");
    }
    // The version it is to run: while one is held back (holds_push), the one it has, so that a
    // starting login server does not wait for a table that is not coming yet.
    const uint64_t serving = holds_push(n) ? n.version : store_.version();
    session.send(control::Welcome{static_cast<uint32_t>(settings_.heartbeat.count()), serving});
    on_rejoin(n);
    // A node that says it runs a newer version than any pushed gets no push (nodes ignore older
    // tables); it shows at version 0, lagging once the DOWN window has passed.
    if (router_ && reg->version < router_->version() && !holds_push(n)) push(n);
    if (n.is_hash()) maybe_refill(n, reg->fresh, reg->filling);
    return;
  }

  Node* found = registry_.on_link(session.id());
  if (!found) {
    spdlog::warn("node link {}: message before register; closing", session.peer());
    session.close();
    return;
  }
  Node& n = *found;
  if (registry_.on_heard(n, now)) {
    // Back from DOWN on its old link (frozen, or cut off for a while): treated as a node that
    // registered again.
    spdlog::info("{} is up again", session.key());
    on_rejoin(n);
  }
  if (const auto* hb = std::get_if<control::Heartbeat>(&m)) {
    // A version above the latest pushed is not trusted for convergence; a lower one does not
    // lower what the node acknowledged (heartbeats and acks may cross).
    take_version(n, session, cluster::VersionSource::kHeartbeat, hb->version);
    if (hb->sent_us != 0) {
      const uint64_t now_us = unix_micros();
      const double lag_s =
          now_us > hb->sent_us ? static_cast<double>(now_us - hb->sent_us) / 1e6 : 0;
      if (heartbeat_lag_counts_.empty())
        heartbeat_lag_counts_.assign(kHeartbeatLagBounds.size() + 1, 0);
      size_t b = 0;
      while (b < kHeartbeatLagBounds.size() && lag_s > kHeartbeatLagBounds[b]) ++b;
      ++heartbeat_lag_counts_[b];
      heartbeat_lag_sum_s_ += lag_s;
    }
    ++heartbeats_;
    n.stats = hb->stats;
    n.held_writes = hb->held_writes;
    n.heartbeat_ns = now;
    if (!n.is_hash()) end_caught_up_refills(now);  // they may wait for its held writes
    cluster::NodeRegistry::update_rate(n, now);
    // A node behind the current version missed a push (or asks for the table after a MOVED):
    // push again, at most once per heartbeat interval.
    if (takeover_.on_node_runs(hb->version, router_ ? router_->version() : 0)) {
      release_held_version("a node runs it");
    }
    if (router_ && hb->version < router_->version() && !holds_push(n) &&
        now - n.last_push_ns > std::chrono::nanoseconds(settings_.heartbeat).count()) {
      push(n);
    }
  } else if (const auto* ack = std::get_if<control::Ack>(&m)) {
    if (take_version(n, session, cluster::VersionSource::kAck, ack->version)) check_convergence();
  } else if (const auto* rep = std::get_if<control::PurgeReport>(&m)) {
    on_purge_report(n, *rep);
  } else if (const auto* stream = std::get_if<control::StreamReport>(&m)) {
    const bool first = !n.stream;
    if (first || n.stream->state != stream->state || n.stream->version != stream->version) {
      spdlog::info("{}: stream {} at version {} ({} records sent)", session.key(),
                   control::stream_state_name(stream->state), stream->version, stream->sent);
    }
    n.stream = *stream;
    n.stream_heard_ns = now;
    for (const std::string& refilled : refills_.on_report(n.name, *stream, now)) {
      streams_done(refilled, "every other replica has streamed to it");
    }
    // Its first report since it registered says it knows streams (see streams_known): the stream
    // on_rejoin could not start yet starts now.
    if (first && n.is_hash() && router_ && !n.rejoin_purge_id) {
      if (const PendingPurge* p = pending_for(n.name); p && needs_stream(n, *p)) {
        send_stream(n, StreamAction::kStart, router_->version());
      }
    }
    maybe_auto_purge();
  }
}

void ConfigService::on_rejoin(Node& n) {
  if (!n.is_hash() || !router_ || !n.link) return;
  PendingPurge* pending = pending_for(n.name);
  // A hash server that was in an earlier table but is not in this one was removed. If it was
  // removed while it could not stream (DOWN: a failover, or a remove while it was away), the
  // records it holds may be stale and include users who logged out since: it purges everything
  // before it can get ids again. (A name never seen before is a new server: nothing to purge.)
  const bool removed = router_->table().server_index(n.name) < 0 && was_ever_member(n.name);
  if (removed && !(pending && pending->streams)) {
    n.rejoin_purge_id = send_purge(n, PurgeAction::kAll, 0);
    if (auto d = drains_.find(n.name); d != drains_.end()) d->second.purged = true;
    if (pending) {
      pending_.erase(pending_.begin() + (pending - pending_.data()));
      save_pending("a purge of everything replaced it");
    }
    return;
  }
  // Old copies wait for its stream: it starts again from the beginning (a restarted server is
  // empty and reports done at once). One that has not reported since it registered gets it with
  // its first report.
  if (pending && n.streams_known() && needs_stream(n, *pending)) {
    send_stream(n, StreamAction::kStart, router_->version());
  }
}

std::string ConfigService::name_held(const cluster::NodeKey& key,
                                     const NodeSession& session) const {
  const Node* held = registry_.find(key);
  const std::shared_ptr<NodeSession> link = held ? link_of(*held) : nullptr;
  if (!held || !registry_.name_held(key, session.id(), link && link->is_open())) return {};
  return "the name " + held->name + " is held by a live " + control::to_string(held->role) +
         " server connected from " + (link ? link->peer() : std::string("?")) +
         "; a second connection cannot take it over (stop that server, or give this one another "
         "--name)";
}

int64_t ConfigService::settling_ns() const { return takeover_.settling_left(monotonic_ns()); }

int64_t ConfigService::down_after_ns() const {
  return std::chrono::nanoseconds(settings_.heartbeat).count() * settings_.missed_heartbeats_down;
}

bool ConfigService::take_version(Node& n, const NodeSession& session, cluster::VersionSource from,
                                 uint64_t version) {
  const uint64_t latest = router_ ? router_->version() : 0;
  const cluster::VersionTaken taken = registry_.take_version(n, from, version, latest);
  note_version(n, session, from, version, taken, latest);
  return taken != cluster::VersionTaken::kRejected;
}

void ConfigService::note_version(Node& n, const NodeSession& session, cluster::VersionSource from,
                                 uint64_t version, cluster::VersionTaken taken, uint64_t latest) {
  if (taken == cluster::VersionTaken::kCaughtUp) {
    spdlog::info("{} caught up: version {}", n.key().text(), n.version);
  }
  if (taken != cluster::VersionTaken::kRejected ||
      !cluster::NodeRegistry::log_rejection(n, monotonic_ns())) {
    return;
  }
  spdlog::warn(
      "{} ({}): {} of version {} rejected: the latest version pushed is {}; it stays at version {}",
      n.key().text(), session.peer(), cluster::version_source_name(from), version, latest,
      n.version);
}

bool ConfigService::was_ever_member(const std::string& name) const {
  return std::any_of(store_.history().begin(), store_.history().end(),
                     [&](const HistoryEntry& h) { return h.table.server_index(name) >= 0; });
}

void ConfigService::on_disconnect(NodeSession& session) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  links_.erase(session.id());
  if (!registry_.on_link(session.id())) return;
  registry_.on_link_closed(session.id());
  spdlog::info("{} disconnected", session.key());
}

namespace {

std::vector<uint8_t> encode_push(const Table& table, const Table* previous, uint64_t grace_ms) {
  control::TablePush p;
  p.table = table;
  if (previous) p.previous = *previous;
  p.grace_ms = grace_ms;
  std::vector<uint8_t> framed;
  control::append_message(p, framed);
  return framed;
}

}  // namespace

const std::vector<uint8_t>& ConfigService::encoded_push() {
  if (push_bytes_version_ != router_->version()) {
    push_bytes_ = encode_push(router_->table(), store_.at_version(router_->version() - 1),
                              static_cast<uint64_t>(settings_.grace.count()));
    push_bytes_version_ = router_->version();
  }
  return push_bytes_;
}

bool ConfigService::holds_push(const Node& n) const {
  return router_ && takeover_.holds_push(n.version, router_->version());
}

void ConfigService::release_held_version(const char* why) {
  if (!router_) return;
  size_t pushed = 0;
  for (auto& [key, n] : registry_.nodes()) {
    if (n.up && n.version < router_->version()) {
      push(n);
      ++pushed;
    }
  }
  spdlog::info("config server {}: version {} to every node now ({}): pushed to {}", name_,
               router_->version(), why, pushed);
}

void ConfigService::push(Node& n) {
  const std::shared_ptr<NodeSession> link = link_of(n);
  if (!link || !router_) return;
  link->send_encoded(encoded_push());
  cluster::NodeRegistry::on_pushed(n, monotonic_ns(), router_->version());
}

void ConfigService::tick() {
  const int64_t now = monotonic_ns();
  // Ticks come every half interval; one a whole interval late means the loop stalled, and the
  // heartbeats that arrived meanwhile are still unread in the sockets.
  const int64_t interval = std::chrono::nanoseconds(settings_.heartbeat).count();
  const int64_t since_last = now - last_tick_ns_;
  const bool stalled = last_tick_ns_ != 0 && since_last > interval + interval / 2;
  last_tick_ns_ = now;
  if (!leading_) return;
  if (takeover_.on_tick(now)) release_held_version("the settle window ended");
  if (stalled) {
    spdlog::warn("config server {}: its loop stalled for {} ms: missed heartbeats count from now",
                 name_, since_last / 1'000'000);
    listening_since_ns_ = now;
  }
  for (const cluster::NodeKey& key : registry_.mark_down(now, listening_since_ns_)) {
    spdlog::warn("{} is DOWN: {} heartbeats missed", key.text(), settings_.missed_heartbeats_down);
    if (key.role != control::Role::kHash) continue;
    // A refill waits for nothing more from it; its own refill starts over when it is back.
    refills_.cancel(key.name);
    for (const std::string& refilled : refills_.drop_peer(key.name, now)) {
      streams_done(refilled, "the other replicas that are up have streamed to it");
    }
    if (Node* n = registry_.find(key); n && settings_.failover_auto) failover(*n);
  }
  if (router_) {
    for (const cluster::NodeKey& key : registry_.mark_lagging(now, router_->version())) {
      const Node* n = registry_.find(key);
      spdlog::warn(
          "{} is LAGGING: version {} not acknowledged within {} ms (it runs {}); "
          "convergence and the automatic purge no longer wait for it",
          key.text(), router_->version(), down_after_ns() / 1'000'000, n ? n->version : 0);
    }
  }
  end_caught_up_refills(now);
  check_convergence();
  maybe_auto_purge();
}

void ConfigService::check_convergence() {
  if (!router_ || registry_.convergence_version() != router_->version()) return;
  if (const std::optional<double> ms = registry_.check_convergence(monotonic_ns())) {
    spdlog::info("version {} reached every node in {:.1f} ms", router_->version(), *ms);
  }
}

AdminResult ConfigService::apply(TableResult next, const std::string& change) {
  if (!next.table) return AdminResult::error(400, next.error);
  if (const int64_t left = settling_ns(); left > 0) {
    return AdminResult::error(
        503, "this config server has just taken over and waits " +
                 format_ms(static_cast<uint64_t>(left / 1'000'000)) +
                 " more for the nodes to register with it, so that none misses a change; try "
                 "again then");
  }
  Table t = std::move(*next.table);
  t.version = store_.version() + 1;
  std::optional<Table> previous = store_.current();
  // Every node gets the new table and the one before it in one control message: one that does
  // not fit would be refused by every node, so the change is refused before it is written.
  std::vector<uint8_t> framed = encode_push(t, previous ? &*previous : nullptr,
                                            static_cast<uint64_t>(settings_.grace.count()));
  if (framed.size() - control::kLengthPrefixSize > control::kMaxMessageSize) {
    const std::string why = "the new table cannot be pushed: with the table before it, it takes " +
                            std::to_string(framed.size() - control::kLengthPrefixSize) +
                            " bytes, above the control message limit of " +
                            std::to_string(control::kMaxMessageSize) +
                            " bytes; nothing was changed (fewer ranges or servers make it smaller)";
    spdlog::error("{}: refused: {}", change, why);
    return AdminResult::error(413, why);
  }
  // Every server of the table before may hold ids it no longer owns: one pending purge each (a
  // newer change replaces a server's older entry; entries of servers not in that table stay).
  std::vector<PendingPurge> pending = pending_;
  if (previous && settings_.auto_purge) {
    const uint64_t not_before = unix_millis() + static_cast<uint64_t>(settings_.grace.count());
    for (const auto& s : previous->servers) {
      const Node* n = find_hash(s.name);
      PendingPurge entry{s.name, t.version, not_before,
                         n && n->up && n->link && !n->rejoin_purge_id && n->streams_known()};
      auto it = std::find_if(pending.begin(), pending.end(),
                             [&](const PendingPurge& p) { return p.server == s.name; });
      if (it == pending.end()) {
        pending.push_back(std::move(entry));
      } else {
        *it = std::move(entry);
      }
    }
  }
  // The table and its pending purges in one write.
  if (auto err = store_write([&] { return store_.commit(t, change, pending); }); !err.empty()) {
    spdlog::error("cannot persist version {}: {}", t.version, err);
    return AdminResult::error(503, "cannot persist the new table: " + err);
  }
  pending_ = std::move(pending);
  router_ = Router::compile(t);
  push_bytes_ = std::move(framed);
  push_bytes_version_ = t.version;
  spdlog::info("version {}: {}", t.version, change);
  registry_.start_convergence(t.version, monotonic_ns());
  for (auto& [key, n] : registry_.nodes()) push(n);
  // Ids moved: every hash server of the table before, and every one not in the new table (it may
  // hold records), streams what it holds that others now own. Not one that is DOWN (a server
  // removed while DOWN purges everything when it comes back) or purging everything.
  if (previous) {
    for (auto& [key, n] : registry_.nodes()) {
      if (!n.is_hash() || !n.up || !n.link || n.rejoin_purge_id || !n.streams_known()) {
        continue;
      }
      if (previous->server_index(n.name) >= 0 || t.server_index(n.name) < 0) {
        send_stream(n, StreamAction::kStart, t.version);
      }
    }
  }
  update_refills();
  check_convergence();
  return AdminResult::ok(change_result(change));
}

json::object ConfigService::change_result(const std::string& change) {
  return json::object{
      {"version", store_.version()}, {"change", change}, {"table", table_value(*store_.current())}};
}

}  // namespace imhash
