// ClusterController, the admin commands that change the table: each checks what it can against
// the current table and hands a plan to write (plan_change), or answers at once.
#include "common/codec/printable.h"
#include "common/routing/table_text.h"
#include "config_server/cluster_controller.h"
#include "config_server/table_edits.h"

namespace imhash::cluster {

namespace {

Outcome refused(int status, std::string why) {
  return {AdminResult::error(status, std::move(why)), {}};
}

const char* const kNoTable = "there is no table yet";

}  // namespace

Change ClusterController::set_mode(RoutingMode mode, std::optional<ModuloHash> modulo_hash,
                                   Now now) {
  if (!router_) return refused(409, "there is no table yet: add a hash server first");
  TableResult next = imhash::set_mode(router_->table(), mode);
  std::string change = std::string("mode ") + to_string(mode);
  if (next.table && modulo_hash) {
    next.table->modulo_hash = *modulo_hash;
    change += std::string(" (") + to_string(*modulo_hash) + ")";
  }
  return plan_change(std::move(next), change, now);
}

Change ClusterController::set_replicas(uint32_t replicas, Now now) {
  if (!router_) return refused(409, "there is no table yet: add a hash server first");
  return plan_change(imhash::set_replicas(router_->table(), replicas),
                     "replicas " + std::to_string(replicas), now);
}

Change ClusterController::add_servers(const std::vector<ServerSpec>& specs, Now now) {
  if (specs.empty()) return refused(400, "no server named");
  Table t;
  if (router_) {
    t = router_->table();
  } else {
    t.mode = settings_.initial_mode;
  }
  std::string change = "added";
  for (const ServerSpec& spec : specs) {
    ServerInfo s{spec.name, spec.address.value_or(""), spec.shards.value_or(0), spec.weight};
    const Node* node = hash_node(spec.name);
    if (node && node->rejoin_purge_id) {
      return refused(409, spec.name +
                              " is still purging the records it held before it was removed; try "
                              "again when that is done");
    }
    // Its old copies, kept until the streams of its removal are done: added back before they are
    // purged, it would own them again, and a copy older than a write the others got meanwhile
    // (or a user who logged out since) would be served again. (A nemesis run: a drain's state
    // went with the config leader, the drained server was added back at once, and it answered a
    // heartbeat from before the drain for 27 s, its copy and the newer one seen in the same
    // second.)
    if (const PendingPurge* p = pending_for(spec.name);
        p && router_ && router_->table().server_index(spec.name) < 0) {
      return refused(409, spec.name +
                              " still holds its old copies of the ids it gave away at version " +
                              std::to_string(p->version) +
                              " (their purge waits for that change's streams); try again when "
                              "it is done (imctl status: pending purges)");
    }
    if (!spec.address || !spec.shards) {
      if (!node) {
        return refused(404, "unknown server " + spec.name +
                                ": no hash server of that name has registered; give its address "
                                "and shards (NAME=HOST:PORT/SHARDS)");
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
    if (!r.table) return refused(400, r.error);
    t = std::move(*r.table);
    change += " " + spec.name;
  }
  if (!router_ && t.mode == RoutingMode::kRange) t.ranges = even_ranges(t.servers);
  if (auto err = validate(t); !err.empty()) return refused(400, err);
  Change c = plan_change(TableResult{std::move(t), ""}, "server " + change, now);
  // A server added back is no longer being drained.
  if (std::holds_alternative<ChangePlan>(c)) {
    for (const ServerSpec& spec : specs) drains_.erase(spec.name);
  }
  return c;
}

Change ClusterController::set_server(const std::string& name,
                                     const std::optional<std::string>& address,
                                     const std::optional<uint32_t>& weight, Now now) {
  if (!router_) return refused(409, kNoTable);
  if (router_->table().server_index(name) < 0) return refused(404, "unknown server " + name);
  std::string change = "server set " + name;
  if (address) change += " address " + *address;
  if (weight) change += " weight " + std::to_string(*weight);
  return plan_change(imhash::set_server(router_->table(), name, address, weight), change, now);
}

Change ClusterController::remove_servers(const std::vector<std::string>& names, Now now) {
  if (!router_) return refused(409, kNoTable);
  Table t = router_->table();
  for (const auto& name : names) {
    if (t.server_index(name) < 0) return refused(404, "unknown server " + name);
  }
  // Judged on what would remain after all of them (the names are distinct), so the sentence names
  // the replicas that let the whole removal through, not the first one that fails.
  if (const size_t left = t.servers.size() - names.size(); left > 0 && left < t.replicas) {
    std::string listed;
    for (const auto& name : names) listed += (listed.empty() ? "" : ", ") + name;
    return refused(409, "cannot remove " + std::string(names.size() == 1 ? "server " : "servers ") +
                            listed + ": " + replicas_exceed_servers(t.replicas, left));
  }
  std::string change = "server removed";
  for (const auto& name : names) {
    auto r = remove_server(t, name);
    if (!r.table) return refused(400, r.error);
    t = std::move(*r.table);
    change += " " + name;
  }
  return plan_change(TableResult{std::move(t), ""}, change, now);
}

Change ClusterController::assign(uint64_t lo, uint64_t hi, const std::string& server, Now now) {
  if (!router_) return refused(409, kNoTable);
  if (router_->table().server_index(server) < 0) return refused(404, "unknown server " + server);
  return plan_change(assign_range(router_->table(), lo, hi, server),
                     "assign " + format_id_range(lo, hi) + " to " + server, now);
}

Change ClusterController::split(uint64_t at, Now now) {
  if (!router_) return refused(409, kNoTable);
  return plan_change(split_range(router_->table(), at), "split at " + std::to_string(at), now);
}

Change ClusterController::merge(uint64_t lo, uint64_t hi, Now now) {
  if (!router_) return refused(409, kNoTable);
  return plan_change(merge_ranges(router_->table(), lo, hi), "merge " + format_id_range(lo, hi),
                     now);
}

Change ClusterController::drain(const std::string& server, Now now) {
  if (!router_) return refused(409, kNoTable);
  if (router_->table().server_index(server) < 0) {
    if (auto d = drains_.find(server); d != drains_.end()) {
      // Again: nothing changes, and the answer says how far it is (so `imctl drain NAME --wait`
      // can be run again after a timeout).
      return Outcome{AdminResult::ok(boost::json::object{
                         {"version", version()},
                         {"change", "none: " + server +
                                        " is already being drained (out of the table since "
                                        "version " +
                                        std::to_string(d->second.version) + ")"}}),
                     {}};
    }
    return refused(404, "unknown server " + server);
  }
  // The same table edit as `server remove` (in range mode its ranges go to the others in turn);
  // the stream on_committed starts moves its records to their new owners.
  Change c = plan_change(remove_server(router_->table(), server), "drain " + server, now);
  if (auto* plan = std::get_if<ChangePlan>(&c)) plan->drained = server;
  return c;
}

}  // namespace imhash::cluster
