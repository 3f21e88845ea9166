// ConfigService's admin API: the JSON views of nodes, servers, purges, streams and drains over the
// controller's state, and the admin commands, handed to the controller (cluster_controller.h).
// The config server's main thread only, as the rest of ConfigService (config_service.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/codec/endpoint.h"
#include "common/codec/printable.h"
#include "common/routing/table_json.h"
#include "common/routing/table_text.h"
#include "common/runtime/clock.h"
#include "common/runtime/metrics.h"
#include "config_server/config_service.h"
#include "config_server/move_rules.h"
#include "config_server/table_edits.h"

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
  json::object o{{"role", to_string(n.role)},
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
    o["in_table"] = controller_.router() && controller_.router()->table().server_index(n.name) >= 0;
    o["replication_lag"] = controller_.replication_lag(n.name);
    if (n.rejoin_purge_id) {
      o["rejoin_purge"] = true;
      o["rejoin_purge_id"] = n.rejoin_purge_id;
    }
    o["stream"] = n.stream ? json::value(stream_json(n)) : json::value(nullptr);
    for (const PendingPurge& p : controller_.pending()) {
      if (p.server == n.name) o["pending_purge"] = pending_json(p);
    }
    if (auto d = controller_.drains().find(n.name); d != controller_.drains().end()) {
      o["draining"] = drain_json(n.name, d->second);
    }
  }
  return o;
}

json::object ConfigService::stream_json(const Node& n) const {
  json::object o = control::stream_report_json(*n.stream);
  o["age_ms"] = (monotonic_ns() - n.stream_heard_ns) / 1'000'000;
  return o;
}

json::object ConfigService::pending_json(const PendingPurge& p) const {
  cluster::PurgeWaits w = controller_.purge_waits(p, now());
  const bool held = w.held;
  json::array waits;
  for (std::string& reason : w.waits) waits.emplace_back(std::move(reason));
  const uint64_t now = unix_millis();
  return json::object{{"server", p.server},
                      {"version", p.version},
                      {"not_before_ms", p.not_before_ms},
                      {"grace_left_ms", p.not_before_ms > now ? p.not_before_ms - now : 0},
                      {"streams", p.streams},
                      {"held", held},
                      {"waits_for", std::move(waits)}};
}

json::object ConfigService::drain_json(const std::string& server, const cluster::Drain& d) const {
  const Node* n = controller_.find_hash(server);
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
  for (const PendingPurge& p : controller_.pending()) {
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

AdminResult ConfigService::status() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array nodes;
  for (const auto& [key, n] : controller_.registry().nodes()) nodes.push_back(node_json(n));
  json::object o{{"version", store_.version()},
                 {"mode", controller_.router() ? to_string(controller_.router()->mode()) : "none"},
                 {"replicas", controller_.router() ? controller_.router()->replicas() : 1},
                 {"converged", controller_.converged()},
                 {"nodes", std::move(nodes)},
                 {"purges", purge_status().body.as_object()["purges"]}};
  if (const uint64_t version = controller_.registry().convergence_version()) {
    json::object c{{"version", version}};
    if (const auto ms = controller_.registry().convergence_ms()) c["reached_every_node_ms"] = *ms;
    o["last_change"] = std::move(c);
  }
  json::array pending;
  uint64_t newest = 0;
  json::array servers;
  for (const PendingPurge& p : controller_.pending()) {
    pending.push_back(pending_json(p));
    newest = std::max(newest, p.version);
    servers.emplace_back(p.server);
  }
  if (!controller_.pending().empty()) {
    // The summary of before issue 13 (the newest version any entry waits on, and the servers).
    o["pending_purge"] = json::object{{"version", newest}, {"servers", std::move(servers)}};
  }
  o["pending_purges"] = std::move(pending);
  json::array drains;
  for (const auto& [name, d] : controller_.drains()) drains.push_back(drain_json(name, d));
  o["drains"] = std::move(drains);
  json::array refills = controller_.refills().json(monotonic_ns());
  for (json::value& r : refills) {
    json::object& entry = r.as_object();
    if (!entry.at("streams_done").as_bool()) continue;
    const std::string server = json::value_to<std::string>(entry.at("server"));
    json::array holding;
    for (const std::string& login :
         controller_.logins_holding(server, controller_.refills().all().at(server).started_ns))
      holding.emplace_back(login);
    entry["login_servers_holding"] = std::move(holding);
  }
  for (const auto& [server, since] : controller_.deferred_refills()) {
    // Not refilled yet: no replica of it is registered to stream to it. It serves no read.
    refills.push_back(json::object{{"server", server},
                                   {"version", controller_.version()},
                                   {"waiting", json::array{}},
                                   {"done", json::array{}},
                                   {"seconds", (monotonic_ns() - since) / 1'000'000'000},
                                   {"progress", 0.0},
                                   {"records_sent", 0},
                                   {"streams_done", false},
                                   {"waiting_for_replica", true}});
  }
  o["refills"] = std::move(refills);
  json::object plane = hooks_.status ? hooks_.status() : json::object{{"role", "single"}};
  plane["store"] = store_.describe();
  if (!name_.empty()) plane["name"] = name_;
  plane["store_latency_ms"] = json::object{
      {"last", store_last_ms_},
      {"mean", store_writes_ ? store_total_ms_ / static_cast<double>(store_writes_) : 0}};
  plane["store_errors"] = store_write_errors_;
  if (const int64_t left = controller_.settling_ns(now()); left > 0)
    plane["settling_ms"] = left / 1'000'000;
  o["control_plane"] = std::move(plane);
  return AdminResult::ok(std::move(o));
}

AdminResult ConfigService::table() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const std::shared_ptr<const Router>& router = controller_.router();
  if (!router) return AdminResult::error(404, "there is no table yet: add a hash server first");
  return AdminResult::ok(table_value(router->table()));
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
  const std::shared_ptr<const Router>& router = controller_.router();
  json::array out;
  if (router) {
    for (const auto& s : router->table().servers) {
      json::object o{{"name", s.name},
                     {"address", s.address},
                     {"shards", s.shards},
                     {"weight", s.weight},
                     {"state", "unknown"}};
      if (const Node* n = controller_.find_hash(s.name)) {
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
  const std::shared_ptr<const Router>& router = controller_.router();
  if (!router) return AdminResult::error(404, "there is no table yet: add a hash server first");
  // The owner (the primary) at the top level, as before replicas; its replicas after it.
  const ReplicaSet set = router->replica_set(id);
  const Route& r = set.routes[0];
  const ServerInfo& s = router->table().servers[r.server];
  json::array replicas;
  for (uint32_t i = 1; i < set.size; ++i) {
    const ServerInfo& replica = router->table().servers[set.routes[i].server];
    replicas.push_back(json::object{
        {"server", replica.name}, {"shard", set.routes[i].shard}, {"address", replica.address}});
  }
  return AdminResult::ok(json::object{{"id", id},
                                      {"server", s.name},
                                      {"shard", r.shard},
                                      {"address", s.address},
                                      {"version", router->version()},
                                      {"replicas", std::move(replicas)}});
}

AdminResult ConfigService::set_mode(RoutingMode mode, std::optional<ModuloHash> modulo_hash) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.set_mode(mode, modulo_hash, now()));
}

AdminResult ConfigService::set_replicas(uint32_t replicas) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.set_replicas(replicas, now()));
}

AdminResult ConfigService::add_servers(const std::vector<ServerSpec>& specs) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.add_servers(specs, now()));
}

AdminResult ConfigService::set_server(const std::string& name,
                                      const std::optional<std::string>& address,
                                      const std::optional<uint32_t>& weight) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.set_server(name, address, weight, now()));
}

AdminResult ConfigService::remove_servers(const std::vector<std::string>& names) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.remove_servers(names, now()));
}

AdminResult ConfigService::assign(uint64_t lo, uint64_t hi, const std::string& server) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.assign(lo, hi, server, now()));
}

AdminResult ConfigService::split(uint64_t at) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.split(at, now()));
}

AdminResult ConfigService::merge(uint64_t lo, uint64_t hi) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.merge(lo, hi, now()));
}

AdminResult ConfigService::purge(const std::string& server, PurgeAction kind,
                                 uint32_t age_seconds) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return answer(controller_.purge(server, kind, age_seconds));
}

AdminResult ConfigService::purge_status() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array out;
  for (const auto& [key, n] : controller_.registry().nodes()) {
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
  AdminResult r = answer(controller_.drain(server, now()));
  // Either way, the answer says how far the drain is.
  if (const auto d = controller_.drains().find(server);
      r.status == 200 && d != controller_.drains().end()) {
    r.body.as_object()["drain"] = drain_json(server, d->second);
  }
  return r;
}

AdminResult ConfigService::drain_status(const std::string& server) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  const auto d = controller_.drains().find(server);
  if (d == controller_.drains().end()) {
    return AdminResult::error(
        404, server + " is not being drained (start with `imctl drain " + server + "`)");
  }
  return AdminResult::ok(drain_json(server, d->second));
}

AdminResult ConfigService::streams() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  json::array out;
  for (const auto& [key, n] : controller_.registry().nodes()) {
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
  AdminResult r = answer(controller_.stream_control(server, action));
  if (const Node* n = controller_.find_hash(server); r.status == 200 && n) {
    r.body.as_object()["stream"] = n->stream ? json::value(stream_json(*n)) : json::value(nullptr);
  }
  return r;
}

}  // namespace imhash
