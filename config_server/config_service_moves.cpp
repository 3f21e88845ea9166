// ConfigService, moving records: the streams that hand ids to their new owners, the pending purges
// that delete the old copies once nothing can read them (their three conditions: purge_waits), a
// failover, and the refills of replicas. docs/design.md §4 and "Replicas" in §3.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/printable.h"
#include "common/table_edits.h"
#include "config_server/config_service.h"
#include "config_server/move_rules.h"

namespace json = boost::json;

namespace imhash {

using control::purge_action_name;
using control::StreamAction;
using control::StreamState;
using frame::PurgeAction;

bool ConfigService::needs_stream(const Node& n, const PendingPurge& p) const {
  return cluster::needs_stream(n, p, router_->version());
}

void ConfigService::on_purge_report(Node& n, const control::PurgeReport& report) {
  if (cluster::record_purge_report(n, report)) {
    spdlog::info("{}: stale records purged (purge {}); it may be added back", n.name,
                 n.rejoin_purge_id);
    n.rejoin_purge_id = 0;
  }
}

uint64_t ConfigService::send_purge(Node& n, PurgeAction action, uint32_t age_seconds) {
  const std::shared_ptr<NodeSession> link = link_of(n);
  if (!link) return 0;
  const uint64_t id = ++next_purge_id_;
  link->send(control::PurgeCommand{action, age_seconds, id});
  spdlog::info("purge {} (id {}) sent to {}", purge_action_name(action), id, n.name);
  return id;
}

void ConfigService::send_stream(Node& n, StreamAction action, uint64_t version) {
  const std::shared_ptr<NodeSession> link = link_of(n);
  if (!link) return;
  link->send(control::StreamCommand{action, version, {}});
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
  for (const auto& [key, p] : registry_.nodes()) {
    if (!p.is_hash() || p.name == n.name || !p.up || !p.link || p.rejoin_purge_id ||
        !p.streams_known() || router_->table().server_index(p.name) < 0) {
      continue;
    }
    peers.push_back(p.name);
  }
  if (peers.empty()) {
    end_refill(n.name, "no other replica is up to refill it", false);
    return;
  }
  if (const auto link = link_of(n)) link->send(control::FillCommand{true});
  for (const std::string& name : peers) {
    if (const auto link = link_of(*find_hash(name))) {
      link->send(control::StreamCommand{StreamAction::kStart, router_->version(), {n.name}});
    }
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
  const Node* n = find_hash(server);
  const std::shared_ptr<NodeSession> link = n ? link_of(*n) : nullptr;
  if (!link) return;
  link->send(control::FillCommand{false});
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
  for (const auto& [key, n] : registry_.nodes()) {
    if (n.is_hash() || !n.up) continue;
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

std::vector<std::string> ConfigService::purge_waits(const PendingPurge& p, bool& held) const {
  cluster::PurgeWaits w = cluster::purge_waits(p, registry_, unix_millis(), settling_ns());
  held = w.held;
  return std::move(w.waits);
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
    Node* n = find_hash(it->server);
    const uint64_t id = send_purge(*n, PurgeAction::kNotOwned, 0);
    spdlog::info("{}: automatic purge {} of the old copies after version {}", it->server, id,
                 it->version);
    if (auto d = drains_.find(it->server); d != drains_.end()) d->second.purged = true;
    it = pending_.erase(it);
    changed = true;
  }
  if (changed) save_pending("an automatic purge was sent");
}

}  // namespace imhash
