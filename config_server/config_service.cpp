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

// Buckets of the heartbeat handling lag histogram (seconds).
const std::vector<double> kHeartbeatLagBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1,     2.5,  5};

// Wall-clock Unix milliseconds: pending purges keep their grace period across a restart, and purge
// ids start from it so that a restarted config server does not reuse one.
// "850 ms", "12.3 s": how long a pending purge still waits.
std::string format_ms(uint64_t ms) {
  if (ms < 1000) return std::to_string(ms) + " ms";
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

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

bool ConfigService::needs_stream(const Node& n, const PendingPurge& p) const {
  // Not one whose stream is done at the entry's version (nothing left to send), nor one that runs
  // against the current table (a start would throw its progress away: after a config server
  // restart, or a link that came back, it carries on). A cancelled one waits for the operator.
  if (!n.stream) return true;
  switch (n.stream->state) {
    case StreamState::kDone:
      return n.stream->version < p.version;
    case StreamState::kRunning:
      return n.stream->version < router_->version();
    case StreamState::kCancelled:
      return false;
    case StreamState::kIdle:
      break;
  }
  return true;
}

void ConfigService::on_purge_report(Node& n, const control::PurgeReport& report) {
  for (const control::PurgeShard& s : report.shards) {
    auto it = std::find_if(n.purges.begin(), n.purges.end(),
                           [&](const control::PurgeShard& p) { return p.shard == s.shard; });
    if (it == n.purges.end()) {
      n.purges.push_back(s);
    } else {
      *it = s;
    }
  }
  std::sort(n.purges.begin(), n.purges.end(),
            [](const auto& a, const auto& b) { return a.shard < b.shard; });
  if (!n.rejoin_purge_id) return;
  // Done only when every shard it has reports this purge done: an older report (of an earlier
  // purge, or from before this one started) does not count.
  const auto done = static_cast<uint64_t>(
      std::count_if(n.purges.begin(), n.purges.end(), [&](const control::PurgeShard& s) {
        return s.id == n.rejoin_purge_id && s.state == frame::PurgeState::kDone;
      }));
  if (done >= std::max<uint64_t>(n.shards, 1)) {
    spdlog::info("{}: stale records purged (purge {}); it may be added back", n.name,
                 n.rejoin_purge_id);
    n.rejoin_purge_id = 0;
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

uint64_t ConfigService::send_purge(Node& n, PurgeAction action, uint32_t age_seconds) {
  if (!n.session) return 0;
  const uint64_t id = ++next_purge_id_;
  n.session->send(control::PurgeCommand{action, age_seconds, id});
  spdlog::info("purge {} (id {}) sent to {}", purge_action_name(action), id, n.name);
  return id;
}

void ConfigService::send_stream(Node& n, StreamAction action, uint64_t version) {
  if (!n.session) return;
  n.session->send(control::StreamCommand{action, version, {}});
  spdlog::info("stream {} (version {}) sent to {}", control::stream_action_name(action), version,
               n.name);
}

void ConfigService::save_pending(const char* why) {
  // A write that fails leaves the file one step behind: after a restart a purge already sent is
  // sent again (harmless), or one just added is missing (the old copies stay, as before issue 13).
  if (std::string err = store_write([&] { return store_.set_pending_purges(pending_); });
      !err.empty()) {
    spdlog::error("cannot persist the pending purges ({}): {}", why, err);
  }
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

void ConfigService::failover(Node& n) {
  if (!router_ || router_->table().server_index(n.name) < 0) return;
  if (router_->table().servers.size() < 2) {
    spdlog::error("failover: {} is DOWN but it is the only hash server", n.name);
    return;
  }
  // Called once, when the server goes DOWN, so this is said once: each copy needs its own server,
  // and the operator chooses between fewer copies and waiting for the server.
  if (const size_t left = router_->table().servers.size() - 1; left < router_->replicas()) {
    spdlog::warn(
        "failover: {} is DOWN but stays in the table: {}, then remove it (imctl server "
        "remove {})",
        n.name, replicas_exceed_servers(router_->replicas(), left), n.name);
    return;
  }
  auto r =
      apply(remove_server(router_->table(), n.name), "failover: removed " + n.name + " (DOWN)");
  if (r.status != 200) spdlog::error("failover of {} failed: {}", n.name, json::serialize(r.body));
}

void ConfigService::maybe_refill(Node& n, bool fresh, bool filling) {
  if (!fresh && !filling) {
    refills_.cancel(n.name);  // the same process again: what it held, it holds
    return;
  }
  const bool member = router_ && router_->table().server_index(n.name) >= 0;
  if (!member || router_->replicas() == 1) {
    // Nothing to refill it from (or it is not one of the table's servers): it starts filling
    // (hash_server.cpp) and is told to stop at once.
    end_refill(n.name, member ? "the table has no replicas" : "it is not in the table", false);
    return;
  }
  std::vector<std::string> peers;
  for (const auto& [key, p] : nodes_) {
    if (p.role != "hash" || p.name == n.name || !p.up || !p.session || p.rejoin_purge_id ||
        !streams_known(p) || router_->table().server_index(p.name) < 0) {
      continue;
    }
    peers.push_back(p.name);
  }
  if (peers.empty()) {
    end_refill(n.name, "no other replica is up to refill it", false);
    return;
  }
  n.session->send(control::FillCommand{true});
  for (const std::string& name : peers) {
    Node* p = find("hash", name);
    p->session->send(control::StreamCommand{StreamAction::kStart, router_->version(), {n.name}});
  }
  refills_.start(n.name, router_->version(), peers, monotonic_ns());
  spdlog::info(
      "{} {}: refilling it at version {} from {} (its lookups read another copy until it has "
      "caught up)",
      n.name, fresh ? "started empty" : "was being refilled", router_->version(),
      fmt::join(peers, ", "));
}

void ConfigService::end_refill(const std::string& server, const char* why, bool refilled) {
  refills_.cancel(server);
  Node* n = find("hash", server);
  if (!n || !n->session) return;
  n->session->send(control::FillCommand{false});
  if (refilled) {
    spdlog::info("{} refilled: {}", server, why);
  } else {
    spdlog::info("{}: not refilled ({}): it answers every lookup", server, why);
  }
}

void ConfigService::streams_done(const std::string& server, const char* why) {
  spdlog::info(
      "{}: {}; it serves reads once the login servers have sent it the writes they held "
      "for it",
      server, why);
  maybe_end_refill(server, monotonic_ns());
}

std::vector<std::string> ConfigService::logins_holding(const std::string& server,
                                                       int64_t since_ns) const {
  // A login server samples its held writes twice a second and sends the latest sample with each
  // heartbeat: one heard a second after `since_ns` has sampled since then.
  constexpr int64_t kSampleSlackNs = 1'000'000'000;
  std::vector<std::string> holding;
  for (const auto& [key, n] : nodes_) {
    if (n.role != "login" || !n.up) continue;
    const auto it = n.held_writes.find(server);
    if (n.heartbeat_ns < since_ns + kSampleSlackNs || (it != n.held_writes.end() && it->second))
      holding.push_back(n.name);
  }
  return holding;
}

void ConfigService::maybe_end_refill(const std::string& server, int64_t now_ns) {
  // A login server whose links to the server came back later than another's holds writes the
  // server has not applied: until it has sent them, the server could answer a read from before
  // them (a LOGOUT held elsewhere). Bounded: a login server that never gets its links back (a
  // partition) must not keep the server out of reads for good.
  constexpr int64_t kCatchUpPatienceNs = 30'000'000'000;
  const auto it = refills_.all().find(server);
  if (it == refills_.all().end() || it->second.streams_done_ns == 0) return;
  const std::vector<std::string> holding = logins_holding(server, it->second.started_ns);
  if (holding.empty()) {
    end_refill(server, "its peers have streamed to it and no login server holds writes for it",
               true);
  } else if (now_ns - it->second.streams_done_ns > kCatchUpPatienceNs) {
    spdlog::warn(
        "{}: login servers {} still hold writes for it {} s after its streams were done; "
        "it serves reads anyway",
        server, fmt::join(holding, ", "), kCatchUpPatienceNs / 1'000'000'000);
    end_refill(server, "its peers have streamed to it (some held writes still on their way)", true);
  }
}

void ConfigService::end_caught_up_refills(int64_t now_ns) {
  std::vector<std::string> streamed;  // end_refill changes the book: names first
  for (const auto& [server, r] : refills_.all()) {
    if (r.streams_done_ns) streamed.push_back(server);
  }
  for (const std::string& server : streamed) maybe_end_refill(server, now_ns);
}

void ConfigService::update_refills() {
  if (!router_ || router_->replicas() == 1) {
    for (const std::string& server : refills_.clear())
      end_refill(server, "no replicas any more", false);
    return;
  }
  std::vector<std::string> gone_servers, gone_peers;
  for (const auto& [server, r] : refills_.all()) {
    if (router_->table().server_index(server) < 0) gone_servers.push_back(server);
    for (const std::string& p : r.waiting) {
      if (router_->table().server_index(p) < 0) gone_peers.push_back(p);
    }
  }
  for (const std::string& server : gone_servers) end_refill(server, "it left the table", false);
  for (const std::string& p : gone_peers) {
    for (const std::string& refilled : refills_.drop_peer(p, monotonic_ns())) {
      streams_done(refilled, "the other replicas of the new table have streamed to it");
    }
  }
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

std::vector<std::string> ConfigService::purge_waits(const PendingPurge& p, bool& held) const {
  std::vector<std::string> waits;
  held = false;
  if (const uint64_t now = unix_millis(); now < p.not_before_ms) {
    waits.push_back("grace period (" + format_ms(p.not_before_ms - now) + " left)");
  }
  if (const int64_t left = settling_ns(); left > 0) {
    waits.push_back("the nodes registering with the new leader (" +
                    format_ms(static_cast<uint64_t>(left / 1'000'000)) + " left)");
  }
  // Old copies become garbage only once no login server can still read them: every login server
  // and hash server that is up runs the new version. The rule has two exceptions, both from the
  // heartbeat rule: a DOWN node (missed_heartbeats_down intervals without a heartbeat) is not
  // waited for, nor is a LAGGING one (up, but the new version was pushed to it a DOWN window ago
  // and it has not acknowledged it: a login server stuck, or one that says version 0 forever
  // would otherwise hold the purge back for good). The grace period is far longer than that
  // window, so a healthy node always acknowledges in time.
  std::string behind;
  for (const auto& [key, n] : nodes_) {
    if (waited_for(n) && n.version < p.version) behind += (behind.empty() ? "" : ", ") + key;
  }
  if (!behind.empty()) {
    waits.push_back("nodes to run version " + std::to_string(p.version) + ": " + behind);
  }
  const Node* n = find("hash", p.server);
  if (!n || !n->up || !n->session) {
    waits.push_back("server down (" +
                    std::string(!n       ? "not registered"
                                : !n->up ? "DOWN"
                                         : "not connected") +
                    ")");
  }
  // Its stream must be done against this version or a later one: then every record it held that
  // another server owns has been acknowledged by that owner.
  const std::optional<control::StreamReport>& r = n ? n->stream : std::nullopt;
  if (!r) {
    waits.push_back("stream (no report since it registered)");
  } else if (r->state == StreamState::kCancelled) {
    held = true;
    waits.push_back("stream cancelled: held until `imctl stream restart " + p.server + "`");
  } else if (r->state != StreamState::kDone || r->version < p.version) {
    waits.push_back("stream done at version " + std::to_string(p.version) + " (now " +
                    control::stream_state_name(r->state) + " at version " +
                    std::to_string(r->version) + ", " + std::to_string(r->sent) + " records sent)");
  }
  return waits;
}

void ConfigService::maybe_auto_purge() {
  if (pending_.empty() || !router_ || !settings_.auto_purge) return;
  bool changed = false;
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool held = false;
    if (!purge_waits(*it, held).empty()) {
      ++it;
      continue;
    }
    Node* n = find("hash", it->server);
    const uint64_t id = send_purge(*n, PurgeAction::kNotOwned, 0);
    spdlog::info("{}: automatic purge {} of the old copies after version {}", it->server, id,
                 it->version);
    if (auto d = drains_.find(it->server); d != drains_.end()) d->second.purged = true;
    it = pending_.erase(it);
    changed = true;
  }
  if (changed) save_pending("an automatic purge was sent");
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

std::string ConfigService::metrics_text() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  MetricsText m;
  m.gauge("imhash_config_table_version", "current routing table version",
          static_cast<double>(store_.version()));
  m.gauge("imhash_config_leader",
          "1 while this config server leads (always, alone on a file store); 0 as a standby",
          leading_ ? 1 : 0);
  m.counter("imhash_config_store_writes_total",
            "writes of the state (a table change, the pending purges) to its store",
            static_cast<double>(store_writes_));
  m.counter("imhash_config_store_write_errors_total", "writes of the state that failed",
            static_cast<double>(store_write_errors_));
  m.counter("imhash_config_store_write_seconds_total", "time spent writing the state",
            store_total_ms_ / 1000);
  m.gauge("imhash_config_store_last_write_seconds", "how long the latest write of the state took",
          store_last_ms_ / 1000);
  m.counter("imhash_config_heartbeats_total", "heartbeats handled",
            static_cast<double>(heartbeats_));
  if (!heartbeat_lag_counts_.empty()) {
    std::vector<uint64_t> cumulative(heartbeat_lag_counts_.size());
    uint64_t run = 0;
    for (size_t i = 0; i < cumulative.size(); ++i) cumulative[i] = run += heartbeat_lag_counts_[i];
    m.histogram("imhash_config_heartbeat_lag_seconds",
                "from a heartbeat's sending (the node's wall clock) to its handling here",
                kHeartbeatLagBounds, cumulative, heartbeat_lag_sum_s_);
  }
  if (hooks_.metrics) hooks_.metrics(m);
  m.counter("imhash_config_auth_refused_total",
            "node links refused because the node did not prove the cluster key",
            static_cast<double>(auth_refused_));
  int up[2] = {0, 0}, down[2] = {0, 0}, lagging[2] = {0, 0};
  for (const auto& [key, n] : nodes_) {
    const int role = n.role == "hash" ? 0 : 1;
    (!n.up ? down : n.lagging ? lagging : up)[role] += 1;
    const MetricsText::Labels who{{"role", n.role}, {"name", n.name}};
    m.gauge("imhash_config_node_version", "table version each node acknowledged",
            static_cast<double>(n.version), who);
    m.gauge("imhash_config_node_up", "1 while the node heartbeats", n.up ? 1 : 0, who);
    m.gauge("imhash_config_node_lagging",
            "1 while the node heartbeats but has not acknowledged the current version within the "
            "DOWN window after its push",
            n.up && n.lagging ? 1 : 0, who);
    if (const auto* r = n.stats.if_contains("records"); r && r->is_number()) {
      m.gauge("imhash_config_node_records", "records a hash server holds (from its heartbeat)",
              r->to_number<double>(), who);
    }
    if (n.role == "hash") {
      m.gauge("imhash_config_replication_lag",
              "writes the login servers hold for a hash server because its links cannot take "
              "them: not applied there yet (replicas; from the login servers' heartbeats)",
              static_cast<double>(replication_lag(n.name)), {{"name", n.name}});
    }
  }
  // Refills in progress (replicas), and how far along.
  for (const json::value& r : refills_.json(monotonic_ns())) {
    const json::object& o = r.as_object();
    const MetricsText::Labels who{{"name", json::value_to<std::string>(o.at("server"))}};
    m.gauge("imhash_config_refill_progress",
            "a hash server being refilled from its peers: the mean share of their slots their "
            "streams have examined (0..1)",
            o.at("progress").to_number<double>(), who);
    m.gauge("imhash_config_refill_records_sent",
            "records the peers of a hash server being refilled have had acknowledged by it",
            o.at("records_sent").to_number<double>(), who);
  }
  for (int role = 0; role < 2; ++role) {
    const char* name = role == 0 ? "hash" : "login";
    m.gauge("imhash_config_nodes", "nodes by role and state", up[role],
            {{"role", name}, {"state", "up"}});
    m.gauge("imhash_config_nodes", "nodes by role and state", down[role],
            {{"role", name}, {"state", "down"}});
    m.gauge("imhash_config_nodes", "nodes by role and state", lagging[role],
            {{"role", name}, {"state", "lagging"}});
  }
  m.counter("imhash_config_rejected_acks_total",
            "acks of a version above the latest pushed: rejected, not applied",
            static_cast<double>(rejected_versions_[kFromAck]));
  for (const VersionSource from : {kFromRegister, kFromHeartbeat}) {
    m.counter("imhash_config_rejected_versions_total",
              "registers and heartbeats naming a version above the latest pushed: not trusted for "
              "convergence",
              static_cast<double>(rejected_versions_[from]), {{"message", kSourceNames[from]}});
  }
  m.counter("imhash_config_registrations_refused_total",
            "registrations refused because a live link holds the name",
            static_cast<double>(refused_name_held_));
  if (convergence_.reached_ms) {
    m.gauge("imhash_config_convergence_seconds",
            "time the last table version took to reach every node that is up and not lagging",
            static_cast<double>(*convergence_.reached_ms) / 1000.0);
  }
  m.gauge(
      "imhash_config_converged",
      "1 when every node that is up and not lagging runs the current table version (imctl status: "
      "converged)",
      converged() ? 1 : 0);
  m.gauge("imhash_config_pending_purge", "1 while any automatic purge is pending",
          pending_.empty() ? 0 : 1);
  m.gauge("imhash_config_pending_purges",
          "automatic purges pending (one per hash server that may hold old copies)",
          static_cast<double>(pending_.size()));
  // Each hash server's latest stream report, one metric after the other.
  struct StreamMetric {
    const char* name;
    const char* help;
    double (*value)(const control::StreamReport&);
  };
  static constexpr StreamMetric kStreamMetrics[] = {
      {"imhash_config_stream_running", "1 while the hash server's outbound stream runs",
       [](const control::StreamReport& r) { return r.state == StreamState::kRunning ? 1.0 : 0.0; }},
      {"imhash_config_stream_records_sent",
       "records the hash server's latest stream has had acknowledged by their new owners",
       [](const control::StreamReport& r) { return static_cast<double>(r.sent); }},
      {"imhash_config_stream_records_per_second", "the stream's rate over the last second or so",
       [](const control::StreamReport& r) { return static_cast<double>(r.rate); }},
      {"imhash_config_stream_eta_seconds",
       "estimated time until the stream is done (0 unless running)",
       [](const control::StreamReport& r) { return static_cast<double>(r.eta_ms) / 1000.0; }},
      {"imhash_config_stream_scanned_ratio",
       "share of the hash server's slots its stream has examined (1 when done)",
       [](const control::StreamReport& r) {
         if (r.state == StreamState::kDone) return 1.0;
         return r.total == 0
                    ? 0.0
                    : std::min(1.0, static_cast<double>(r.scanned) / static_cast<double>(r.total));
       }},
  };
  for (const StreamMetric& metric : kStreamMetrics) {
    for (const auto& [key, n] : nodes_) {
      if (n.role == "hash" && n.stream) {
        m.gauge(metric.name, metric.help, metric.value(*n.stream), {{"name", n.name}});
      }
    }
  }
  return m.str();
}

// ---------------------------------------------------------------------------------------------

}  // namespace imhash
