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
    : store_(store), settings_(settings), timer_(ctx) {
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
  nodes_.clear();
  drains_.clear();
  refills_ = Refills{};
  convergence_ = Convergence{};
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
  settle_until_ns_ =
      store_.version() == 0
          ? 0
          : monotonic_ns() + std::max<int64_t>(down_after_ns(), kSettleAfterTakeover.count());
  holding_version_ = settle_until_ns_ != 0;
  spdlog::info("config server {}: serving version {} from {}", name_, store_.version(),
               store_.describe());
  return {};
}

void ConfigService::step_down(const std::string& why) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  standby_why_ = why;
  if (!leading_) return;
  leading_ = false;
  for (auto& [key, n] : nodes_) {
    if (!n.session) continue;
    n.session->key.clear();
    n.session->close();
  }
  nodes_.clear();
  drains_.clear();
  refills_ = Refills{};
  convergence_ = Convergence{};
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
  for (auto& [key, n] : nodes_) {
    if (n.session) n.session->close();
  }
}

ConfigService::Node* ConfigService::find(const std::string& role, const std::string& name) {
  auto it = nodes_.find(role + "/" + name);
  return it == nodes_.end() ? nullptr : &it->second;
}

const ConfigService::Node* ConfigService::find(const std::string& role,
                                               const std::string& name) const {
  auto it = nodes_.find(role + "/" + name);
  return it == nodes_.end() ? nullptr : &it->second;
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
    const std::string role = control::to_string(reg->role);
    const std::string key = role + "/" + reg->name;
    if (std::string why = registration_problem(*reg); !why.empty()) {
      // Refused before it touches the registry: a node of that name already registered keeps its
      // entry. The node logs the reason and tries again after its back-off.
      spdlog::error("{} from {}: registration refused: {}", key, session.peer(), why);
      session.send_last(control::Refused{std::move(why), ""});
      return;
    }
    if (!session.key.empty() && session.key != key) {
      spdlog::warn("node link {}: registered as {}, now as {}; closing", session.peer(),
                   session.key, key);
      session.close();
      return;
    }
    if (std::string why = name_held(key, session); !why.empty()) {
      // The live holder keeps its link; the newcomer tries again after its back-off, and takes
      // the name over once the holder's link has closed or it is DOWN.
      ++refused_name_held_;
      spdlog::warn("{} from {}: registration refused: {}", key, session.peer(), why);
      session.send_last(control::Refused{std::move(why), ""});
      return;
    }
    Node& n = nodes_[key];
    if (n.session && n.session != &session) {
      spdlog::warn("{} registered again from {}: dropping its older link ({}, {})", key,
                   session.peer(), n.session->peer(), n.up ? "closed" : "DOWN");
      n.session->key.clear();
      n.session->close();
    }
    const bool was_up = n.up;
    n.role = role;
    n.name = reg->name;
    n.address = reg->address;
    n.shards = reg->shards;
    n.pid = reg->pid;
    // The version it runs now (lower after a restart from an older saved table), unless it is
    // above the latest pushed. A LAGGING node stays LAGGING through a new registration: a node
    // that reconnects again and again does not restart the window.
    n.version = 0;
    take_version(n, session, kFromRegister, reg->version);
    n.last_heard_ns = now;
    n.up = true;
    n.session = &session;
    session.key = key;
    // It may be another process: its stream and purge progress are what it reports from now on
    // (a hash server sends its latest stream report after registering).
    n.stream.reset();
    n.purges.clear();
    spdlog::info("{} {} at {} (pid {}, version {}){}", was_up ? "re-registered" : "registered", key,
                 n.address, n.pid, n.version, was_up ? "" : ": up");
    if (holding_version_ && router_ && reg->version == router_->version()) {
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
    if (n.role == "hash") maybe_refill(n, reg->fresh, reg->filling);
    return;
  }

  auto it = nodes_.find(session.key);
  if (it == nodes_.end()) {
    spdlog::warn("node link {}: message before register; closing", session.peer());
    session.close();
    return;
  }
  Node& n = it->second;
  n.last_heard_ns = now;
  if (!n.up) {
    // Back from DOWN on its old link (frozen, or cut off for a while): treated as a node that
    // registered again.
    spdlog::info("{} is up again", session.key);
    n.up = true;
    on_rejoin(n);
  }
  if (const auto* hb = std::get_if<control::Heartbeat>(&m)) {
    // A version above the latest pushed is not trusted for convergence; a lower one does not
    // lower what the node acknowledged (heartbeats and acks may cross).
    take_version(n, session, kFromHeartbeat, hb->version);
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
    if (n.role == "login") end_caught_up_refills(now);  // they may wait for its held writes
    update_rate(n, now);
    // A node behind the current version missed a push (or asks for the table after a MOVED):
    // push again, at most once per heartbeat interval.
    if (holding_version_ && router_ && hb->version == router_->version()) {
      release_held_version("a node runs it");
    }
    if (router_ && hb->version < router_->version() && !holds_push(n) &&
        now - n.last_push_ns > std::chrono::nanoseconds(settings_.heartbeat).count()) {
      push(n);
    }
  } else if (const auto* ack = std::get_if<control::Ack>(&m)) {
    if (take_version(n, session, kFromAck, ack->version)) check_convergence();
  } else if (const auto* rep = std::get_if<control::PurgeReport>(&m)) {
    on_purge_report(n, *rep);
  } else if (const auto* stream = std::get_if<control::StreamReport>(&m)) {
    const bool first = !n.stream;
    if (first || n.stream->state != stream->state || n.stream->version != stream->version) {
      spdlog::info("{}: stream {} at version {} ({} records sent)", session.key,
                   control::stream_state_name(stream->state), stream->version, stream->sent);
    }
    n.stream = *stream;
    n.stream_heard_ns = now;
    for (const std::string& refilled : refills_.on_report(n.name, *stream, now)) {
      streams_done(refilled, "every other replica has streamed to it");
    }
    // Its first report since it registered says it knows streams (see streams_known): the stream
    // on_rejoin could not start yet starts now.
    if (first && n.role == "hash" && router_ && !n.rejoin_purge_id) {
      if (const PendingPurge* p = pending_for(n.name); p && needs_stream(n, *p)) {
        send_stream(n, StreamAction::kStart, router_->version());
      }
    }
    maybe_auto_purge();
  }
}

void ConfigService::on_rejoin(Node& n) {
  if (n.role != "hash" || !router_ || !n.session) return;
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
  if (pending && streams_known(n) && needs_stream(n, *pending)) {
    send_stream(n, StreamAction::kStart, router_->version());
  }
}

std::string ConfigService::name_held(const std::string& key, const NodeSession& session) const {
  const auto it = nodes_.find(key);
  if (it == nodes_.end()) return {};
  const Node& held = it->second;
  if (!held.session || held.session == &session || !held.session->is_open() || !held.up) {
    return {};  // free: no link, or one that closed or is DOWN (the heartbeat rule)
  }
  return "the name " + held.name + " is held by a live " + held.role + " server connected from " +
         held.session->peer() + "; a second connection cannot take it over (stop that server, or " +
         "give this one another --name)";
}

int64_t ConfigService::settling_ns() const {
  return settle_until_ns_ == 0 ? 0 : std::max<int64_t>(0, settle_until_ns_ - monotonic_ns());
}

int64_t ConfigService::down_after_ns() const {
  return std::chrono::nanoseconds(settings_.heartbeat).count() * settings_.missed_heartbeats_down;
}

bool ConfigService::take_version(Node& n, const NodeSession& session, VersionSource from,
                                 uint64_t version) {
  // Every push carries the current version, so nothing above it can have been installed.
  const uint64_t latest = router_ ? router_->version() : 0;
  if (version > latest) {
    ++rejected_versions_[from];
    const int64_t now = monotonic_ns();
    if (now - n.last_rejected_log_ns >= 1'000'000'000) {
      n.last_rejected_log_ns = now;
      spdlog::warn(
          "{} ({}): {} of version {} rejected: the latest version pushed is {}; it stays "
          "at version {}",
          session.key.empty() ? n.role + "/" + n.name : session.key, session.peer(),
          kSourceNames[from], version, latest, n.version);
    }
    return false;
  }
  n.version = std::max(n.version, version);
  if (n.version >= latest) {
    n.behind_since_ns = 0;
    if (n.lagging) spdlog::info("{}/{} caught up: version {}", n.role, n.name, n.version);
    n.lagging = false;
  }
  return true;
}

void ConfigService::update_rate(Node& n, int64_t now) {
  // Hash servers count upserts, gets and deletes; login servers count datagrams.
  double total = 0;
  for (const char* key : {"upserts", "gets", "deletes", "received"}) {
    if (const auto* v = n.stats.if_contains(key); v && v->is_number())
      total += v->to_number<double>();
  }
  // Averaged over at least a second: nodes sample their counters twice a second, so two
  // heartbeats in a row may carry the same figures.
  if (n.last_requests >= 0 && now - n.last_requests_ns < 1'000'000'000) return;
  if (n.last_requests >= 0 && total >= n.last_requests) {
    n.requests_per_s =
        (total - n.last_requests) * 1e9 / static_cast<double>(now - n.last_requests_ns);
  }
  n.last_requests = total;
  n.last_requests_ns = now;
}

bool ConfigService::was_ever_member(const std::string& name) const {
  return std::any_of(store_.history().begin(), store_.history().end(),
                     [&](const HistoryEntry& h) { return h.table.server_index(name) >= 0; });
}

void ConfigService::on_disconnect(NodeSession& session) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  auto it = nodes_.find(session.key);
  if (it == nodes_.end() || it->second.session != &session) return;
  it->second.session = nullptr;
  spdlog::info("{} disconnected", session.key);
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
  return holding_version_ && router_ && n.version > 0 && n.version < router_->version();
}

void ConfigService::release_held_version(const char* why) {
  holding_version_ = false;
  if (!router_) return;
  size_t pushed = 0;
  for (auto& [key, n] : nodes_) {
    if (n.up && n.version < router_->version()) {
      push(n);
      ++pushed;
    }
  }
  spdlog::info("config server {}: version {} to every node now ({}): pushed to {}", name_,
               router_->version(), why, pushed);
}

void ConfigService::push(Node& n) {
  if (!n.session || !router_) return;
  n.session->send_encoded(encoded_push());
  n.last_push_ns = monotonic_ns();
  if (n.version < router_->version() && n.behind_since_ns == 0) n.behind_since_ns = n.last_push_ns;
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
  if (holding_version_ && settling_ns() == 0) release_held_version("the settle window ended");
  if (stalled) {
    spdlog::warn("config server {}: its loop stalled for {} ms: missed heartbeats count from now",
                 name_, since_last / 1'000'000);
    listening_since_ns_ = now;
  }
  const int64_t down_after = down_after_ns();
  for (auto& [key, n] : nodes_) {
    if (n.up && now - std::max(n.last_heard_ns, listening_since_ns_) > down_after) {
      n.up = false;
      spdlog::warn("{} is DOWN: {} heartbeats missed", key, settings_.missed_heartbeats_down);
      if (n.role == "hash") {
        // A refill waits for nothing more from it; its own refill starts over when it is back.
        refills_.cancel(n.name);
        for (const std::string& refilled : refills_.drop_peer(n.name, now)) {
          streams_done(refilled, "the other replicas that are up have streamed to it");
        }
      }
      if (n.role == "hash" && settings_.failover_auto) failover(n);
    }
    // LAGGING: up, but the latest version was pushed to it (or it was seen behind) a DOWN window
    // ago and it has not acknowledged it. It heartbeats, so it is not DOWN; but a node that never
    // installs the table (or says version 0 forever) must not hold up the automatic purge.
    if (!router_ || !n.up || n.version >= router_->version()) continue;
    if (n.behind_since_ns == 0) n.behind_since_ns = now;
    if (!n.lagging && now - n.behind_since_ns > down_after) {
      n.lagging = true;
      spdlog::warn(
          "{} is LAGGING: version {} not acknowledged within {} ms (it runs {}); "
          "convergence and the automatic purge no longer wait for it",
          key, router_->version(), down_after / 1'000'000, n.version);
    }
  }
  end_caught_up_refills(now);
  check_convergence();
  maybe_auto_purge();
}

void ConfigService::check_convergence() {
  if (!router_ || convergence_.reached_ms || convergence_.version != router_->version()) return;
  for (const auto& [key, n] : nodes_) {
    if (waited_for(n) && n.version < convergence_.version) return;
  }
  convergence_.reached_ms = static_cast<double>(monotonic_ns() - convergence_.started_ns) / 1e6;
  spdlog::info("version {} reached every node in {:.1f} ms", convergence_.version,
               *convergence_.reached_ms);
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
      const Node* n = find("hash", s.name);
      PendingPurge entry{s.name, t.version, not_before,
                         n && n->up && n->session && !n->rejoin_purge_id && streams_known(*n)};
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
  convergence_ = Convergence{t.version, monotonic_ns(), std::nullopt};
  for (auto& [key, n] : nodes_) push(n);
  // Ids moved: every hash server of the table before, and every one not in the new table (it may
  // hold records), streams what it holds that others now own. Not one that is DOWN (a server
  // removed while DOWN purges everything when it comes back) or purging everything.
  if (previous) {
    for (auto& [key, n] : nodes_) {
      if (n.role != "hash" || !n.up || !n.session || n.rejoin_purge_id || !streams_known(n)) {
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
