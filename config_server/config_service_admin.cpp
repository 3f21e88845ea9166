// ConfigService's admin API: the JSON views of nodes, servers, purges, streams and drains, and the
// admin commands (table changes, purges, drains, stream control) that the HTTP handler calls.
// The config server's main thread only, as the rest of ConfigService (config_service.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/endpoint.h"
#include "common/metrics.h"
#include "common/printable.h"
#include "common/table_edits.h"
#include "common/table_json.h"
#include "common/table_text.h"
#include "config_server/config_service.h"
#include "config_server/move_rules.h"

namespace asio = boost::asio;
namespace json = boost::json;

namespace imhash {

using control::purge_action_name;
using control::purge_state_name;
using control::StreamAction;
using control::StreamState;
using frame::PurgeAction;

json::value ConfigService::table_value(const Table& t) {
  boost::system::error_code ec;
  return json::parse(table_to_json(t), ec);
}

// Admin API

json::object ConfigService::node_json(const Node& n) const {
  const double heard_ms = static_cast<double>(monotonic_ns() - n.last_heard_ns) / 1e6;
  json::object o{{"role", control::to_string(n.role)},
                 {"name", n.name},
                 {"address", n.address},
                 {"state", !n.up       ? "down"
                           : n.lagging ? "lagging"
                                       : "up"},
                 {"connected", n.link != 0},
                 {"version", n.version},
                 {"last_heartbeat_ms", static_cast<int64_t>(heard_ms)},
                 {"pid", n.pid},
                 {"requests_per_s", static_cast<int64_t>(n.requests_per_s + 0.5)},
                 {"stats", n.stats}};
  if (!n.is_hash() && !n.held_writes.empty()) {
    json::object held;
    for (const auto& [server, count] : n.held_writes) held[server] = count;
    o["held_writes"] = std::move(held);
  }
  if (n.is_hash()) {
    o["shards"] = n.shards;
    o["in_table"] = router_ && router_->table().server_index(n.name) >= 0;
    o["replication_lag"] = replication_lag(n.name);
    if (n.rejoin_purge_id) {
      o["rejoin_purge"] = true;
      o["rejoin_purge_id"] = n.rejoin_purge_id;
    }
    o["stream"] = n.stream ? json::value(stream_json(n)) : json::value(nullptr);
    for (const PendingPurge& p : pending_) {
      if (p.server == n.name) o["pending_purge"] = pending_json(p);
    }
    if (auto d = drains_.find(n.name); d != drains_.end()) {
      o["draining"] = drain_json(n.name, d->second);
    }
  }
  return o;
}

uint64_t ConfigService::replication_lag(const std::string& server) const {
  // What the login servers that heartbeat hold for it; a DOWN login server's holds are out of
  // date (and lost with it if it died).
  uint64_t lag = 0;
  for (const auto& [key, n] : registry_.nodes()) {
    if (n.is_hash() || !n.up) continue;
    if (const auto it = n.held_writes.find(server); it != n.held_writes.end()) lag += it->second;
  }
  return lag;
}

json::object ConfigService::stream_json(const Node& n) const {
  json::object o = control::stream_report_json(*n.stream);
  o["age_ms"] = (monotonic_ns() - n.stream_heard_ns) / 1'000'000;
  return o;
}

json::object ConfigService::pending_json(const PendingPurge& p) const {
  bool held = false;
  json::array waits;
  for (std::string& w : purge_waits(p, held)) waits.emplace_back(std::move(w));
  const uint64_t now = unix_millis();
  return json::object{{"server", p.server},
                      {"version", p.version},
                      {"not_before_ms", p.not_before_ms},
                      {"grace_left_ms", p.not_before_ms > now ? p.not_before_ms - now : 0},
                      {"streams", p.streams},
                      {"held", held},
                      {"waits_for", std::move(waits)}};
}

json::object ConfigService::drain_json(const std::string& server, const Drain& d) const {
  const Node* n = find_hash(server);
  json::object o{{"server", server}, {"version", d.version}, {"purge_sent", d.purged}};
  std::optional<double> records;
  if (n) {
    if (const auto* r = n->stats.if_contains("records"); r && r->is_number()) {
      records = r->to_number<double>();
    }
  }
  o["state"] = !n ? "unknown" : !n->up ? "down" : n->link ? "up" : "disconnected";
  o["records"] = records ? json::value(static_cast<uint64_t>(*records)) : json::value(nullptr);
  o["stream"] = n && n->stream ? json::value(stream_json(*n)) : json::value(nullptr);
  bool pending = false;
  for (const PendingPurge& p : pending_) {
    if (p.server == server) {
      o["pending_purge"] = pending_json(p);
      pending = true;
    }
  }
  if (!pending) o["pending_purge"] = nullptr;
  // Drained: its stream was done at the drain version or later (the automatic purge waits for
  // that), the purge was sent and is no longer pending, and it says it holds nothing.
  o["drained"] = cluster::drained(d.purged, pending, n, records);
  return o;
}

bool ConfigService::converged() const { return router_ && registry_.converged(router_->version()); }

AdminResult ConfigService::status() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array nodes;
  for (const auto& [key, n] : registry_.nodes()) nodes.push_back(node_json(n));
  json::object o{{"version", store_.version()},
                 {"mode", router_ ? to_string(router_->mode()) : "none"},
                 {"replicas", router_ ? router_->replicas() : 1},
                 {"converged", converged()},
                 {"nodes", std::move(nodes)},
                 {"purges", purge_status().body.as_object()["purges"]}};
  if (const uint64_t version = registry_.convergence_version()) {
    json::object c{{"version", version}};
    if (const auto ms = registry_.convergence_ms()) c["reached_every_node_ms"] = *ms;
    o["last_change"] = std::move(c);
  }
  json::array pending;
  uint64_t newest = 0;
  json::array servers;
  for (const PendingPurge& p : pending_) {
    pending.push_back(pending_json(p));
    newest = std::max(newest, p.version);
    servers.emplace_back(p.server);
  }
  if (!pending_.empty()) {
    // The summary of before issue 13 (the newest version any entry waits on, and the servers).
    o["pending_purge"] = json::object{{"version", newest}, {"servers", std::move(servers)}};
  }
  o["pending_purges"] = std::move(pending);
  json::array drains;
  for (const auto& [name, d] : drains_) drains.push_back(drain_json(name, d));
  o["drains"] = std::move(drains);
  json::array refills = refills_.json(monotonic_ns());
  for (json::value& r : refills) {
    json::object& entry = r.as_object();
    if (!entry.at("streams_done").as_bool()) continue;
    const std::string server = json::value_to<std::string>(entry.at("server"));
    json::array holding;
    for (const std::string& login : logins_holding(server, refills_.all().at(server).started_ns))
      holding.emplace_back(login);
    entry["login_servers_holding"] = std::move(holding);
  }
  o["refills"] = std::move(refills);
  json::object plane = hooks_.status ? hooks_.status() : json::object{{"role", "single"}};
  plane["store"] = store_.describe();
  if (!name_.empty()) plane["name"] = name_;
  plane["store_latency_ms"] = json::object{
      {"last", store_last_ms_},
      {"mean", store_writes_ ? store_total_ms_ / static_cast<double>(store_writes_) : 0}};
  plane["store_errors"] = store_write_errors_;
  if (const int64_t left = settling_ns(); left > 0) plane["settling_ms"] = left / 1'000'000;
  o["control_plane"] = std::move(plane);
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
      if (const Node* n = find_hash(s.name)) {
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
  // The owner (the primary) at the top level, as before replicas; its replicas after it.
  const ReplicaSet set = router_->replica_set(id);
  const Route& r = set.routes[0];
  const ServerInfo& s = router_->table().servers[r.server];
  json::array replicas;
  for (uint32_t i = 1; i < set.size; ++i) {
    const ServerInfo& replica = router_->table().servers[set.routes[i].server];
    replicas.push_back(json::object{
        {"server", replica.name}, {"shard", set.routes[i].shard}, {"address", replica.address}});
  }
  return AdminResult::ok(json::object{{"id", id},
                                      {"server", s.name},
                                      {"shard", r.shard},
                                      {"address", s.address},
                                      {"version", router_->version()},
                                      {"replicas", std::move(replicas)}});
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

AdminResult ConfigService::set_replicas(uint32_t replicas) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet: add a hash server first");
  return apply(imhash::set_replicas(router_->table(), replicas),
               "replicas " + std::to_string(replicas));
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
    const Node* node = find_hash(spec.name);
    if (node && node->rejoin_purge_id) {
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
  // A server added back is no longer being drained.
  for (const ServerSpec& spec : specs) drains_.erase(spec.name);
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
  for (const auto& name : names) {
    if (t.server_index(name) < 0) return AdminResult::error(404, "unknown server " + name);
  }
  // Judged on what would remain after all of them (the names are distinct), so the sentence names
  // the replicas that let the whole removal through, not the first one that fails.
  if (const size_t left = t.servers.size() - names.size(); left > 0 && left < t.replicas) {
    std::string listed;
    for (const auto& name : names) listed += (listed.empty() ? "" : ", ") + name;
    return AdminResult::error(409, "cannot remove " +
                                       std::string(names.size() == 1 ? "server " : "servers ") +
                                       listed + ": " + replicas_exceed_servers(t.replicas, left));
  }
  std::string change = "server removed";
  for (const auto& name : names) {
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
  Node* n = find_hash(server);
  if (!n) return AdminResult::error(404, "unknown hash server " + server);
  if (!n->link) return AdminResult::error(503, server + " is not connected");
  send_purge(*n, kind, age_seconds);
  // A drain with the automatic purge off ends with the operator's purge.
  if (auto d = drains_.find(server);
      d != drains_.end() && (kind == PurgeAction::kNotOwned || kind == PurgeAction::kAll)) {
    d->second.purged = true;
  }
  json::array shards;
  for (const auto& p : n->purges) shards.push_back(control::purge_shard_json(p));
  return AdminResult::ok(json::object{
      {"server", server}, {"requested", purge_action_name(kind)}, {"shards", std::move(shards)}});
}

AdminResult ConfigService::purge_status() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array out;
  for (const auto& [key, n] : registry_.nodes()) {
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

AdminResult ConfigService::drain(const std::string& server) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!router_) return AdminResult::error(409, "there is no table yet");
  if (router_->table().server_index(server) < 0) {
    if (auto d = drains_.find(server); d != drains_.end()) {
      // Again: nothing changes, and the answer says how far it is (so `imctl drain NAME --wait`
      // can be run again after a timeout).
      return AdminResult::ok(
          json::object{{"version", store_.version()},
                       {"change", "none: " + server +
                                      " is already being drained (out of the table since "
                                      "version " +
                                      std::to_string(d->second.version) + ")"},
                       {"drain", drain_json(server, d->second)}});
    }
    return AdminResult::error(404, "unknown server " + server);
  }
  // The same table edit as `server remove` (in range mode its ranges go to the others in turn);
  // the stream apply() starts moves its records to their new owners.
  AdminResult r = apply(remove_server(router_->table(), server), "drain " + server);
  if (r.status != 200) return r;
  const Drain& d = drains_[server] = Drain{store_.version(), false};
  if (!settings_.auto_purge) {
    spdlog::warn("drain {}: the automatic purge is off: purge it by hand once its stream is done",
                 server);
  }
  r.body.as_object()["drain"] = drain_json(server, d);
  return r;
}

AdminResult ConfigService::drain_status(const std::string& server) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  auto d = drains_.find(server);
  if (d == drains_.end()) {
    return AdminResult::error(
        404, server + " is not being drained (start with `imctl drain " + server + "`)");
  }
  return AdminResult::ok(drain_json(server, d->second));
}

AdminResult ConfigService::streams() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array out;
  for (const auto& [key, n] : registry_.nodes()) {
    if (!n.is_hash()) continue;
    out.push_back(
        json::object{{"server", n.name},
                     {"state", !n.up    ? "down"
                               : n.link ? "up"
                                        : "disconnected"},
                     {"stream", n.stream ? json::value(stream_json(n)) : json::value(nullptr)}});
  }
  return AdminResult::ok(json::object{{"streams", std::move(out)}});
}

AdminResult ConfigService::stream_control(const std::string& server, StreamControl action) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  Node* n = find_hash(server);
  if (!n) return AdminResult::error(404, "unknown hash server " + server);
  if (!n->link) return AdminResult::error(503, server + " is not connected");
  if (!router_) return AdminResult::error(409, "there is no table yet");
  if (!n->streams_known()) {
    // A hash server of a version before streams closes its link on a message it does not know.
    return AdminResult::error(409, server +
                                       " has sent no stream report since it registered: it does "
                                       "not stream (a version before streams?)");
  }
  if (action == StreamControl::kRestart) {
    if (n->rejoin_purge_id) {
      return AdminResult::error(409, server +
                                         " is purging everything it held before it was "
                                         "removed; it has nothing to stream");
    }
    send_stream(*n, StreamAction::kStart, router_->version());
  } else {
    send_stream(*n, StreamAction::kCancel, router_->version());
  }
  return AdminResult::ok(
      json::object{{"server", server},
                   {"requested", action == StreamControl::kRestart ? "restart" : "cancel"},
                   {"version", router_->version()},
                   {"stream", n->stream ? json::value(stream_json(*n)) : json::value(nullptr)}});
}

}  // namespace imhash
