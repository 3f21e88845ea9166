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
using frame::PurgeAction;

namespace {

json::value table_value(const Table& t) {
  boost::system::error_code ec;
  return json::parse(table_to_json(t), ec);
}

// Why a registration is refused, or "". A hash server's address is what login servers dial, so it
// must be one they can: HOST:PORT as a table holds it, and not an unspecified address (a login
// server dialling 0.0.0.0 or :: reaches itself). A login server's address is only shown.
std::string registration_problem(const control::Register& reg) {
  if (reg.role != control::Role::kHash) return {};
  if (std::string problem = check_host_port(reg.address); !problem.empty()) {
    return "hash server " + reg.name + " registered the address " + quoted(reg.address) +
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

// ---------------------------------------------------------------------------------------------
// Node links

void ConfigService::on_message(NodeSession& session, const control::Message& m) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const int64_t now = monotonic_ns();
  if (const auto* reg = std::get_if<control::Register>(&m)) {
    const std::string role = control::to_string(reg->role);
    const std::string key = role + "/" + reg->name;
    if (std::string why = registration_problem(*reg); !why.empty()) {
      // Refused before it touches the registry: a node of that name already registered keeps its
      // entry. The node logs the reason and tries again after its back-off.
      spdlog::error("{} from {}: registration refused: {}", key, session.peer(), why);
      session.send_last(control::Refused{std::move(why)});
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
      session.send_last(control::Refused{std::move(why)});
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
    spdlog::info("{} {} at {} (pid {}, version {}){}", was_up ? "re-registered" : "registered", key,
                 n.address, n.pid, n.version, was_up ? "" : ": up");
    session.send(
        control::Welcome{static_cast<uint32_t>(settings_.heartbeat.count()), store_.version()});
    // A hash server that was in an earlier table but is not in this one was removed: if it comes
    // back, the records it holds are stale, and it purges everything before it can get ids again.
    // (A name never seen before is a new server: nothing to purge.)
    if (n.role == "hash" && router_ && router_->table().server_index(n.name) < 0 &&
        was_ever_member(n.name)) {
      n.rejoin_purge = true;
      send_purge(n, PurgeAction::kAll, 0);
    }
    // A node that says it runs a newer version than any pushed gets no push (nodes ignore older
    // tables); it shows at version 0, lagging once the DOWN window has passed.
    if (router_ && reg->version < router_->version()) push(n);
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
  if (!n.up) spdlog::info("{} is up again", session.key);
  n.up = true;
  if (const auto* hb = std::get_if<control::Heartbeat>(&m)) {
    // A version above the latest pushed is not trusted for convergence; a lower one does not
    // lower what the node acknowledged (heartbeats and acks may cross).
    take_version(n, session, kFromHeartbeat, hb->version);
    n.stats = hb->stats;
    update_rate(n, now);
    // A node behind the current version missed a push (or asks for the table after a MOVED):
    // push again, at most once per heartbeat interval.
    if (router_ && hb->version < router_->version() &&
        now - n.last_push_ns > std::chrono::nanoseconds(settings_.heartbeat).count()) {
      push(n);
    }
  } else if (const auto* ack = std::get_if<control::Ack>(&m)) {
    if (take_version(n, session, kFromAck, ack->version)) check_convergence();
  } else if (const auto* rep = std::get_if<control::PurgeReport>(&m)) {
    n.purges = rep->shards;
    if (n.rejoin_purge) {
      const bool done = std::all_of(rep->shards.begin(), rep->shards.end(), [](const auto& s) {
        return s.state != frame::PurgeState::kRunning;
      });
      if (done && !rep->shards.empty()) {
        n.rejoin_purge = false;
        spdlog::info("{}: stale records purged; it may be added back", session.key);
      }
    }
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

void ConfigService::push(Node& n) {
  if (!n.session || !router_) return;
  n.session->send_encoded(encoded_push());
  n.last_push_ns = monotonic_ns();
  if (n.version < router_->version() && n.behind_since_ns == 0) n.behind_since_ns = n.last_push_ns;
}

void ConfigService::send_purge(Node& n, PurgeAction action, uint32_t age_seconds) {
  if (!n.session) return;
  n.session->send(control::PurgeCommand{action, age_seconds});
  spdlog::info("purge {} sent to {}", purge_action_name(action), n.name);
}

void ConfigService::tick() {
  const int64_t now = monotonic_ns();
  const int64_t down_after = down_after_ns();
  for (auto& [key, n] : nodes_) {
    if (n.up && now - n.last_heard_ns > down_after) {
      n.up = false;
      spdlog::warn("{} is DOWN: {} heartbeats missed", key, settings_.missed_heartbeats_down);
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
  check_convergence();
  maybe_auto_purge();
}

void ConfigService::failover(Node& n) {
  if (!router_ || router_->table().server_index(n.name) < 0) return;
  if (router_->table().servers.size() < 2) {
    spdlog::error("failover: {} is DOWN but it is the only hash server", n.name);
    return;
  }
  auto r =
      apply(remove_server(router_->table(), n.name), "failover: removed " + n.name + " (DOWN)");
  if (r.status != 200) spdlog::error("failover of {} failed: {}", n.name, json::serialize(r.body));
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

void ConfigService::maybe_auto_purge() {
  if (!pending_purge_ || !router_) return;
  if (pending_purge_->version != router_->version()) return;
  if (monotonic_ns() < pending_purge_->not_before_ns) return;
  // Old copies become garbage only once no login server can still read them: every login server
  // and hash server that is up runs the new version. The rule has two exceptions, both from the
  // heartbeat rule: a DOWN node (missed_heartbeats_down intervals without a heartbeat) is not
  // waited for, nor is a LAGGING one (up, but the new version was pushed to it a DOWN window ago
  // and it has not acknowledged it: a login server stuck, or one that says version 0 forever
  // would otherwise hold the purge back for good). The grace period is far longer than that
  // window, so a healthy node always acknowledges in time.
  for (const auto& [key, n] : nodes_) {
    if (waited_for(n) && n.version < pending_purge_->version) return;
  }
  for (const std::string& name : pending_purge_->servers) {
    if (Node* n = find("hash", name); n && n->up) send_purge(*n, PurgeAction::kNotOwned, 0);
  }
  pending_purge_.reset();
}

AdminResult ConfigService::apply(TableResult next, const std::string& change) {
  if (!next.table) return AdminResult::error(400, next.error);
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
  if (auto err = store_.commit(t, change); !err.empty()) {
    spdlog::error("cannot persist version {}: {}", t.version, err);
    return AdminResult::error(503, "cannot persist the new table: " + err);
  }
  router_ = Router::compile(t);
  push_bytes_ = std::move(framed);
  push_bytes_version_ = t.version;
  spdlog::info("version {}: {}", t.version, change);
  convergence_ = Convergence{t.version, monotonic_ns(), std::nullopt};
  if (previous && settings_.auto_purge) {
    PendingPurge p{
        t.version, monotonic_ns() + std::chrono::nanoseconds(settings_.grace).count(), {}};
    for (const auto& s : previous->servers) p.servers.push_back(s.name);
    pending_purge_ = std::move(p);
  }
  for (auto& [key, n] : nodes_) push(n);
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
  m.gauge("imhash_config_pending_purge", "1 while an automatic purge waits for its grace period",
          pending_purge_ ? 1 : 0);
  return m.str();
}

// ---------------------------------------------------------------------------------------------
// Admin API

json::object ConfigService::node_json(const Node& n) const {
  const double heard_ms = static_cast<double>(monotonic_ns() - n.last_heard_ns) / 1e6;
  json::object o{{"role", n.role},
                 {"name", n.name},
                 {"address", n.address},
                 {"state", !n.up       ? "down"
                           : n.lagging ? "lagging"
                                       : "up"},
                 {"connected", n.session != nullptr},
                 {"version", n.version},
                 {"last_heartbeat_ms", static_cast<int64_t>(heard_ms)},
                 {"pid", n.pid},
                 {"requests_per_s", static_cast<int64_t>(n.requests_per_s + 0.5)},
                 {"stats", n.stats}};
  if (n.role == "hash") {
    o["shards"] = n.shards;
    o["in_table"] = router_ && router_->table().server_index(n.name) >= 0;
    if (n.rejoin_purge) o["rejoin_purge"] = true;
  }
  return o;
}

bool ConfigService::converged() const {
  if (!router_) return false;
  return std::none_of(nodes_.begin(), nodes_.end(), [&](const auto& entry) {
    return waited_for(entry.second) && entry.second.version < router_->version();
  });
}

AdminResult ConfigService::status() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array nodes;
  for (const auto& [key, n] : nodes_) nodes.push_back(node_json(n));
  json::object o{{"version", store_.version()},
                 {"mode", router_ ? to_string(router_->mode()) : "none"},
                 {"converged", converged()},
                 {"nodes", std::move(nodes)},
                 {"purges", purge_status().body.as_object()["purges"]}};
  if (convergence_.version) {
    json::object c{{"version", convergence_.version}};
    if (convergence_.reached_ms) c["reached_every_node_ms"] = *convergence_.reached_ms;
    o["last_change"] = std::move(c);
  }
  if (pending_purge_) {
    o["pending_purge"] = json::object{{"version", pending_purge_->version},
                                      {"servers", json::value_from(pending_purge_->servers)}};
  }
  return AdminResult::ok(std::move(o));
}

AdminResult ConfigService::table() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(404, "there is no table yet: add a hash server first");
  return AdminResult::ok(table_value(router_->table()));
}

AdminResult ConfigService::history(uint64_t limit) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array versions;
  for (const auto& h : store_.history()) {
    if (versions.size() >= limit) break;
    versions.push_back(json::object{{"version", h.version},
                                    {"time", h.time},
                                    {"change", h.change},
                                    {"table", table_value(h.table)}});
  }
  return AdminResult::ok(json::object{{"versions", std::move(versions)}});
}

AdminResult ConfigService::servers() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array out;
  if (router_) {
    for (const auto& s : router_->table().servers) {
      json::object o{{"name", s.name},
                     {"address", s.address},
                     {"shards", s.shards},
                     {"weight", s.weight},
                     {"state", "unknown"}};
      if (const Node* n = find("hash", s.name)) {
        o["state"] = n->up ? "up" : "down";
        if (const auto* r = n->stats.if_contains("records")) o["records"] = *r;
      }
      out.push_back(std::move(o));
    }
  }
  return AdminResult::ok(json::object{{"servers", std::move(out)}});
}

AdminResult ConfigService::where(uint64_t id) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(404, "there is no table yet: add a hash server first");
  const Route r = router_->route(id);
  const ServerInfo& s = router_->table().servers[r.server];
  return AdminResult::ok(json::object{{"id", id},
                                      {"server", s.name},
                                      {"shard", r.shard},
                                      {"address", s.address},
                                      {"version", router_->version()}});
}

AdminResult ConfigService::set_mode(RoutingMode mode, std::optional<ModuloHash> modulo_hash) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet: add a hash server first");
  TableResult next = imhash::set_mode(router_->table(), mode);
  std::string change = std::string("mode ") + to_string(mode);
  if (next.table && modulo_hash) {
    next.table->modulo_hash = *modulo_hash;
    change += std::string(" (") + to_string(*modulo_hash) + ")";
  }
  return apply(std::move(next), change);
}

AdminResult ConfigService::add_servers(const std::vector<ServerSpec>& specs) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (specs.empty()) return AdminResult::error(400, "no server named");
  Table t;
  if (router_) {
    t = router_->table();
  } else {
    t.mode = settings_.initial_mode;
  }
  std::string change = "added";
  for (const ServerSpec& spec : specs) {
    ServerInfo s{spec.name, spec.address.value_or(""), spec.shards.value_or(0), spec.weight};
    const Node* node = find("hash", spec.name);
    if (node && node->rejoin_purge) {
      return AdminResult::error(409, spec.name +
                                         " is still purging the records it held before it "
                                         "was removed; try again when that is done");
    }
    if (!spec.address || !spec.shards) {
      if (!node) {
        return AdminResult::error(404, "unknown server " + spec.name +
                                           ": no hash server of that name has registered; give "
                                           "its address and shards (NAME=HOST:PORT/SHARDS)");
      }
      if (!spec.address) s.address = node->address;
      if (!spec.shards) s.shards = node->shards;
    }
    TableResult r;
    if (!router_) {
      // The first table: every server named now shares the id space from the start.
      t.servers.push_back(s);
      r.table = t;
    } else {
      r = add_server(t, s);
    }
    if (!r.table) return AdminResult::error(400, r.error);
    t = std::move(*r.table);
    change += " " + spec.name;
  }
  if (!router_ && t.mode == RoutingMode::kRange) t.ranges = even_ranges(t.servers);
  if (auto err = validate(t); !err.empty()) return AdminResult::error(400, err);
  return apply(TableResult{std::move(t), ""}, "server " + change);
}

AdminResult ConfigService::set_server(const std::string& name,
                                      const std::optional<std::string>& address,
                                      const std::optional<uint32_t>& weight) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet");
  if (router_->table().server_index(name) < 0) {
    return AdminResult::error(404, "unknown server " + name);
  }
  std::string change = "server set " + name;
  if (address) change += " address " + *address;
  if (weight) change += " weight " + std::to_string(*weight);
  return apply(imhash::set_server(router_->table(), name, address, weight), change);
}

AdminResult ConfigService::remove_servers(const std::vector<std::string>& names) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet");
  Table t = router_->table();
  std::string change = "server removed";
  for (const auto& name : names) {
    if (t.server_index(name) < 0) return AdminResult::error(404, "unknown server " + name);
    auto r = remove_server(t, name);
    if (!r.table) return AdminResult::error(400, r.error);
    t = std::move(*r.table);
    change += " " + name;
  }
  return apply(TableResult{std::move(t), ""}, change);
}

AdminResult ConfigService::assign(uint64_t lo, uint64_t hi, const std::string& server) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet");
  if (router_->table().server_index(server) < 0) {
    return AdminResult::error(404, "unknown server " + server);
  }
  return apply(assign_range(router_->table(), lo, hi, server),
               "assign " + format_id_range(lo, hi) + " to " + server);
}

AdminResult ConfigService::split(uint64_t at) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet");
  return apply(split_range(router_->table(), at), "split at " + std::to_string(at));
}

AdminResult ConfigService::merge(uint64_t lo, uint64_t hi) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet");
  return apply(merge_ranges(router_->table(), lo, hi), "merge " + format_id_range(lo, hi));
}

AdminResult ConfigService::purge(const std::string& server, PurgeAction kind,
                                 uint32_t age_seconds) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  Node* n = find("hash", server);
  if (!n) return AdminResult::error(404, "unknown hash server " + server);
  if (!n->session) return AdminResult::error(503, server + " is not connected");
  send_purge(*n, kind, age_seconds);
  json::array shards;
  for (const auto& p : n->purges) shards.push_back(control::purge_shard_json(p));
  return AdminResult::ok(json::object{
      {"server", server}, {"requested", purge_action_name(kind)}, {"shards", std::move(shards)}});
}

AdminResult ConfigService::purge_status() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array out;
  for (const auto& [key, n] : nodes_) {
    for (const auto& p : n.purges) {
      if (p.state == frame::PurgeState::kIdle) continue;
      out.push_back(json::object{{"server", n.name},
                                 {"shard", p.shard},
                                 {"kind", purge_action_name(p.kind)},
                                 {"state", purge_state_name(p.state)},
                                 {"scanned", p.scanned},
                                 {"total", p.total},
                                 {"deleted", p.deleted}});
    }
  }
  return AdminResult::ok(json::object{{"purges", std::move(out)}});
}

}  // namespace imhash
