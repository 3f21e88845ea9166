// ClusterController, moving records: the streams that hand ids to their new owners, the pending
// purges that delete the old copies once nothing can read them (their three conditions:
// move_rules.h), a failover, the refills of replicas, and the admin commands that purge and
// steer streams. docs/design.md §4 and "Replicas" in §3.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "config_server/cluster_controller.h"
#include "config_server/table_edits.h"

namespace json = boost::json;

namespace imhash::cluster {

using control::purge_action_name;
using control::StreamAction;
using frame::PurgeAction;

PendingPurge* ClusterController::pending_for(const std::string& server) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const PendingPurge& p) { return p.server == server; });
  return it == pending_.end() ? nullptr : &*it;
}

void ClusterController::on_rejoin(Node& n, Out& out) {
  if (!n.is_hash() || !router_ || !n.link) return;
  PendingPurge* pending = pending_for(n.name);
  // A hash server that was in an earlier table but is not in this one was removed. If it was
  // removed while it could not stream (DOWN: a failover, or a remove while it was away), the
  // records it holds may be stale and include users who logged out since: it purges everything
  // before it can get ids again. (A name never seen before is a new server: nothing to purge.)
  const bool removed = router_->table().server_index(n.name) < 0 && was_ever_member(n.name);
  if (removed && !(pending && pending->streams)) {
    n.rejoin_purge_id = send_purge(n, PurgeAction::kAll, 0, out);
    if (auto d = drains_.find(n.name); d != drains_.end()) d->second.purged = true;
    if (pending) {
      pending_.erase(pending_.begin() + (pending - pending_.data()));
      save_pending("a purge of everything replaced it", out);
    }
    return;
  }
  // Old copies wait for its stream: it starts again from the beginning (a restarted server is
  // empty and reports done at once). One that has not reported since it registered gets it with
  // its first report.
  if (pending && n.streams_known() && needs_stream(n, *pending, version())) {
    send_stream(n, StreamAction::kStart, version(), out);
  }
}

uint64_t ClusterController::send_purge(Node& n, PurgeAction action, uint32_t age_seconds,
                                       Out& out) {
  const LinkId link = open_link(n);
  if (!link) return 0;
  const uint64_t id = ++next_purge_id_;
  out.send(link, control::PurgeCommand{action, age_seconds, id});
  out.log(LogLevel::kInfo,
          fmt::format("purge {} (id {}) sent to {}", purge_action_name(action), id, n.name));
  return id;
}

void ClusterController::send_stream(Node& n, StreamAction action, uint64_t version, Out& out) {
  const LinkId link = open_link(n);
  if (!link) return;
  out.send(link, control::StreamCommand{action, version, {}});
  out.log(LogLevel::kInfo, fmt::format("stream {} (version {}) sent to {}",
                                       control::stream_action_name(action), version, n.name));
}

void ClusterController::save_pending(const char* why, Out& out) {
  out.actions.push_back(PersistPending{pending_, why});
}

void ClusterController::failover(Node& n, Now now, Out& out) {
  if (!router_ || router_->table().server_index(n.name) < 0) return;
  if (router_->table().servers.size() < 2) {
    out.log(LogLevel::kError,
            fmt::format("failover: {} is DOWN but it is the only hash server", n.name));
    return;
  }
  // Called once, when the server goes DOWN, so this is said once: each copy needs its own server,
  // and the operator chooses between fewer copies and waiting for the server.
  if (const size_t left = router_->table().servers.size() - 1; left < router_->replicas()) {
    out.log(LogLevel::kWarn,
            fmt::format("failover: {} is DOWN but stays in the table: {}, then remove it (imctl "
                        "server remove {})",
                        n.name, replicas_exceed_servers(router_->replicas(), left), n.name));
    return;
  }
  Change c = plan_change(remove_server(router_->table(), n.name),
                         "failover: removed " + n.name + " (DOWN)", now);
  if (auto* refused = std::get_if<Outcome>(&c)) {
    for (Action& a : refused->actions) out.actions.push_back(std::move(a));
    out.log(LogLevel::kError, fmt::format("failover of {} failed: {}", n.name,
                                          json::serialize(refused->answer.body)));
    return;
  }
  out.actions.push_back(CommitChange{std::get<ChangePlan>(std::move(c))});
}

void ClusterController::maybe_refill(Node& n, bool fresh, bool filling, Now now, Out& out) {
  if (!fresh && !filling) {
    refills_.cancel(n.name);  // the same process again: what it held, it holds
    return;
  }
  const bool member = router_ && router_->table().server_index(n.name) >= 0;
  if (!member || router_->replicas() == 1) {
    // Nothing to refill it from (or it is not one of the table's servers): it starts filling
    // (hash_server.cpp) and is told to stop at once.
    end_refill(n.name, member ? "the table has no replicas" : "it is not in the table", false, out);
    return;
  }
  const std::vector<std::string> peers = refill_peers(n);
  // Serving reads before every replica of it has streamed to it would answer from what it lacks:
  // it fills (serving no read) while a replica of it has not registered here, at most
  // kNoReplicaPatienceNs; and while this leader settles, since replicas that have not found it
  // yet look the same. Nemesis runs: a server back empty at a new leader was refilled from the
  // one replica registered (167 acknowledged writes read as absent), from hash4 alone 0.4 s before
  // hash1 and hash3 registered (180), from hash3 and hash4 while hash2, which had the copies of
  // its whole range, had not found the leader yet (759). Waited for: every other server of the
  // table (which of them hold copies of its ids depends on the mode; a refill waits at most the
  // patience for one that does not come).
  const auto [since, first] = deferred_refills_.emplace(n.name, now.steady_ns);
  const bool patience_left = now.steady_ns - since->second < kNoReplicaPatienceNs;
  const size_t others = router_->table().servers.size() - 1;
  const bool settling = takeover_.settling_left(now.steady_ns) > 0;
  if (settling || (peers.size() < others && patience_left)) {
    if (first) {
      if (const LinkId link = open_link(n)) out.send(link, control::FillCommand{true});
      out.log(LogLevel::kInfo,
              fmt::format("{} started empty and {}: it serves no read until every replica of "
                          "it is registered here, and is refilled from them (at most {} s)",
                          n.name,
                          settling ? "this leader is settling"
                                   : fmt::format("{} of {} other servers are registered here",
                                                 peers.size(), others),
                          kNoReplicaPatienceNs / 1'000'000'000));
    }
    return;
  }
  if (peers.empty()) {
    deferred_refills_.erase(n.name);
    end_refill(n.name, "no other replica came back to refill it", false, out);
    return;
  }
  deferred_refills_.erase(n.name);
  if (const LinkId link = open_link(n)) out.send(link, control::FillCommand{true});
  for (const std::string& name : peers) {
    if (const LinkId link = open_link(*hash_node(name))) {
      out.send(link, control::StreamCommand{StreamAction::kStart, version(), {n.name}});
    }
  }
  refills_.start(n.name, version(), peers, now.steady_ns);
  out.log(LogLevel::kInfo,
          fmt::format("{} {}: refilling it at version {} from {} (its lookups read another copy "
                      "until it has caught up)",
                      n.name, fresh ? "started empty" : "was being refilled", version(),
                      fmt::join(peers, ", ")));
}

std::vector<std::string> ClusterController::refill_peers(const Node& n) const {
  std::vector<std::string> peers;
  for (const auto& [key, p] : registry_.nodes()) {
    if (!p.is_hash() || p.name == n.name || !p.up || !p.link || p.rejoin_purge_id ||
        !p.streams_known() || router_->table().server_index(p.name) < 0) {
      continue;
    }
    peers.push_back(p.name);
  }
  return peers;
}

void ClusterController::retry_deferred_refills(Now now, Out& out) {
  std::vector<std::string> waiting;
  for (const auto& [name, since] : deferred_refills_) waiting.push_back(name);
  for (const std::string& name : waiting) {
    Node* n = hash_node(name);
    const bool member = router_ && router_->table().server_index(name) >= 0;
    if (!n || !n->up || !n->link || !member || router_->replicas() == 1) {
      deferred_refills_.erase(name);  // gone, or nothing to refill it from: maybe_refill
      if (n && n->up && n->link) maybe_refill(*n, true, false, now, out);  // says so
      continue;
    }
    maybe_refill(*n, true, false, now, out);  // starts it once nothing is waited for
  }
}

void ClusterController::end_refill(const std::string& server, const char* why, bool refilled,
                                   Out& out) {
  refills_.cancel(server);
  const Node* n = hash_node(server);
  const LinkId link = n ? open_link(*n) : 0;
  if (!link) return;
  out.send(link, control::FillCommand{false});
  if (refilled) {
    out.log(LogLevel::kInfo, fmt::format("{} refilled: {}", server, why));
  } else {
    out.log(LogLevel::kInfo,
            fmt::format("{}: not refilled ({}): it answers every lookup", server, why));
  }
}

void ClusterController::streams_done(const std::string& server, const char* why, Now now,
                                     Out& out) {
  out.log(LogLevel::kInfo, fmt::format("{}: {}; it serves reads once the login servers have sent "
                                       "it the writes they held for it",
                                       server, why));
  maybe_end_refill(server, now, out);
}

std::vector<std::string> ClusterController::logins_holding(const std::string& server,
                                                           int64_t since_ns) const {
  // A login server samples its held writes twice a second and sends the latest sample with each
  // heartbeat: one heard a second after `since_ns` has sampled since then.
  constexpr int64_t kSampleSlackNs = 1'000'000'000;
  std::vector<std::string> holding;
  for (const auto& [key, n] : registry_.nodes()) {
    if (n.is_hash() || !n.up) continue;
    const auto it = n.held_writes.find(server);
    if (n.heartbeat_ns < since_ns + kSampleSlackNs || (it != n.held_writes.end() && it->second))
      holding.push_back(n.name);
  }
  return holding;
}

void ClusterController::maybe_end_refill(const std::string& server, Now now, Out& out) {
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
               true, out);
  } else if (now.steady_ns - it->second.streams_done_ns > kCatchUpPatienceNs) {
    out.log(LogLevel::kWarn,
            fmt::format("{}: login servers {} still hold writes for it {} s after its streams "
                        "were done; it serves reads anyway",
                        server, fmt::join(holding, ", "), kCatchUpPatienceNs / 1'000'000'000));
    end_refill(server, "its peers have streamed to it (some held writes still on their way)", true,
               out);
  }
}

void ClusterController::end_caught_up_refills(Now now, Out& out) {
  std::vector<std::string> streamed;  // end_refill changes the book: names first
  for (const auto& [server, r] : refills_.all()) {
    if (r.streams_done_ns) streamed.push_back(server);
  }
  for (const std::string& server : streamed) maybe_end_refill(server, now, out);
}

void ClusterController::update_refills(Now now, Out& out) {
  if (!router_ || router_->replicas() == 1) {
    for (const std::string& server : refills_.clear())
      end_refill(server, "no replicas any more", false, out);
    return;
  }
  std::vector<std::string> gone_servers, gone_peers;
  for (const auto& [server, r] : refills_.all()) {
    if (router_->table().server_index(server) < 0) gone_servers.push_back(server);
    for (const std::string& p : r.waiting) {
      if (router_->table().server_index(p) < 0) gone_peers.push_back(p);
    }
  }
  for (const std::string& server : gone_servers)
    end_refill(server, "it left the table", false, out);
  for (const std::string& p : gone_peers) {
    for (const std::string& refilled : refills_.drop_peer(p, now.steady_ns)) {
      streams_done(refilled, "the other replicas of the new table have streamed to it", now, out);
    }
  }
}

void ClusterController::maybe_auto_purge(Now now, Out& out) {
  if (pending_.empty() || !router_ || !settings_.auto_purge) return;
  bool changed = false;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!purge_waits(*it, now).waits.empty()) {
      ++it;
      continue;
    }
    Node* n = hash_node(it->server);
    const uint64_t id = send_purge(*n, PurgeAction::kNotOwned, 0, out);
    out.log(LogLevel::kInfo,
            fmt::format("{}: automatic purge {} of the old copies after version {}", it->server, id,
                        it->version));
    if (auto d = drains_.find(it->server); d != drains_.end()) d->second.purged = true;
    it = pending_.erase(it);
    changed = true;
  }
  if (changed) save_pending("an automatic purge was sent", out);
}

// ---------------------------------------------------------------------------------------------
// Admin commands that send

Outcome ClusterController::purge(const std::string& server, PurgeAction kind,
                                 uint32_t age_seconds) {
  Out out;
  Node* n = hash_node(server);
  if (!n) return {AdminResult::error(404, "unknown hash server " + server), {}};
  if (!open_link(*n)) return {AdminResult::error(503, server + " is not connected"), {}};
  send_purge(*n, kind, age_seconds, out);
  // A drain with the automatic purge off ends with the operator's purge.
  if (auto d = drains_.find(server);
      d != drains_.end() && (kind == PurgeAction::kNotOwned || kind == PurgeAction::kAll)) {
    d->second.purged = true;
  }
  json::array shards;
  for (const auto& p : n->purges) shards.push_back(control::purge_shard_json(p));
  return {AdminResult::ok(json::object{{"server", server},
                                       {"requested", purge_action_name(kind)},
                                       {"shards", std::move(shards)}}),
          std::move(out.actions)};
}

Outcome ClusterController::stream_control(const std::string& server, StreamControl action) {
  Out out;
  Node* n = hash_node(server);
  if (!n) return {AdminResult::error(404, "unknown hash server " + server), {}};
  if (!open_link(*n)) return {AdminResult::error(503, server + " is not connected"), {}};
  if (!router_) return {AdminResult::error(409, "there is no table yet"), {}};
  if (!n->streams_known()) {
    // A hash server of a version before streams closes its link on a message it does not know.
    return {
        AdminResult::error(409, server + " has sent no stream report since it registered: it does "
                                         "not stream (a version before streams?)"),
        {}};
  }
  if (action == StreamControl::kRestart) {
    if (n->rejoin_purge_id) {
      return {AdminResult::error(409, server + " is purging everything it held before it was "
                                               "removed; it has nothing to stream"),
              {}};
    }
    send_stream(*n, StreamAction::kStart, version(), out);
  } else {
    send_stream(*n, StreamAction::kCancel, version(), out);
  }
  json::object answer{{"server", server},
                      {"requested", action == StreamControl::kRestart ? "restart" : "cancel"},
                      {"version", version()}};
  return {AdminResult::ok(std::move(answer)), std::move(out.actions)};
}

}  // namespace imhash::cluster
