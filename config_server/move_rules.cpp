#include "config_server/move_rules.h"

#include <algorithm>

#include "common/codec/printable.h"

namespace imhash::cluster {

using control::StreamState;

bool needs_stream(const NodeRecord& n, const PendingPurge& p, uint64_t latest) {
  if (!n.stream) return true;
  switch (n.stream->state) {
    case StreamState::kDone:
      return n.stream->version < p.version;
    case StreamState::kRunning:
      return n.stream->version < latest;
    case StreamState::kCancelled:
      return false;
    case StreamState::kIdle:
      break;
  }
  return true;
}

PurgeWaits purge_waits(const PendingPurge& p, const NodeRegistry& nodes, uint64_t now_unix_ms,
                       int64_t settling_left_ns) {
  PurgeWaits out;
  if (now_unix_ms < p.not_before_ms) {
    out.waits.push_back("grace period (" + format_ms(p.not_before_ms - now_unix_ms) + " left)");
  }
  if (settling_left_ns > 0) {
    out.waits.push_back("the nodes registering with the new leader (" +
                        format_ms(static_cast<uint64_t>(settling_left_ns / 1'000'000)) + " left)");
  }
  // The heartbeat rule's two exceptions: a DOWN node is not waited for, nor is a LAGGING one (a
  // login server stuck, or one that says version 0 forever, would otherwise hold the purge back
  // for good). The grace period is far longer than the DOWN window, so a healthy node always
  // acknowledges in time.
  std::string behind;
  for (const auto& [key, n] : nodes.nodes()) {
    if (n.waited_for() && n.version < p.version) {
      behind += (behind.empty() ? "" : ", ") + key.text();
    }
  }
  if (!behind.empty()) {
    out.waits.push_back("nodes to run version " + std::to_string(p.version) + ": " + behind);
  }
  const NodeRecord* n = nodes.find({Role::kHash, p.server});
  if (!n || !n->up || !n->link) {
    out.waits.push_back("server down (" +
                        std::string(!n       ? "not registered"
                                    : !n->up ? "DOWN"
                                             : "not connected") +
                        ")");
  }
  // Its stream must be done against this version or a later one: then every record it held that
  // another server owns has been acknowledged by that owner.
  const std::optional<control::StreamReport>& r = n ? n->stream : std::nullopt;
  if (!r) {
    out.waits.push_back("stream (no report since it registered)");
  } else if (r->state == StreamState::kCancelled) {
    out.held = true;
    out.waits.push_back("stream cancelled: held until `imctl stream restart " + p.server + "`");
  } else if (r->state != StreamState::kDone || r->version < p.version) {
    out.waits.push_back("stream done at version " + std::to_string(p.version) + " (now " +
                        control::stream_state_name(r->state) + " at version " +
                        std::to_string(r->version) + ", " + std::to_string(r->sent) +
                        " records sent)");
  }
  return out;
}

bool streams_running(const Table& streamers, const Table& current, const NodeRegistry& nodes,
                     uint64_t version) {
  for (const ServerInfo& s : streamers.servers) {
    const NodeRecord* n = nodes.find({Role::kHash, s.name});
    // Not told to stream (cluster_controller.cpp, on_committed): purging everything, or no report
    // since it registered (its first report starts the stream it owes, and then counts).
    if (!n || n->rejoin_purge_id || !n->stream) continue;
    // DOWN or not connected: counted while the table has it (it streams again when it is back: a
    // loaded server taken for DOWN is often only slow), not once it has been removed.
    if ((!n->up || !n->link) && current.server_index(s.name) < 0) continue;
    const StreamState state = n->stream->state;
    if (state == StreamState::kCancelled) continue;
    if (state != StreamState::kDone || n->stream->version < version) return true;
  }
  return false;
}

bool record_purge_report(NodeRecord& n, const control::PurgeReport& report) {
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
  if (!n.rejoin_purge_id) return false;
  const auto done = static_cast<uint64_t>(
      std::count_if(n.purges.begin(), n.purges.end(), [&](const control::PurgeShard& s) {
        return s.id == n.rejoin_purge_id && s.state == frame::PurgeState::kDone;
      }));
  return done >= std::max<uint64_t>(n.shards, 1);
}

bool drained(bool purge_sent, bool purge_pending, const NodeRecord* n,
             std::optional<double> records) {
  return purge_sent && !purge_pending && records && *records == 0 && n && n->rejoin_purge_id == 0;
}

}  // namespace imhash::cluster
