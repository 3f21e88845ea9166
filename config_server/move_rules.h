// The rules by which the config server moves records (docs/design.md §4): when a hash server is
// told to stream, when a pending purge of old copies may go (its three conditions), when a purge
// of everything is done, and when a drained server is empty. Pure functions over the node
// registry: ConfigService sends the messages and logs.
//
// A core (config_server/node_registry.h says what that means); times come in as arguments. Not
// thread-safe: the config server's main thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/routing/control_protocol.h"
#include "config_server/node_registry.h"
#include "config_server/pending_purge.h"

namespace imhash::cluster {

// Whether hash server `n`, with the pending purge `p` and the table at `latest`, is to be told to
// stream (again): not if its stream is done at the entry's version (nothing left to send), nor if
// it runs against the current table (a start would throw its progress away: after a config server
// restart, or a link that came back, it carries on); a cancelled one waits for the operator.
bool needs_stream(const NodeRecord& n, const PendingPurge& p, uint64_t latest);

// What the pending purge `p` still waits for, in words (empty: it may be sent now), and whether
// only the operator can release it (a cancelled stream). Old copies become garbage only once no
// login server can still read them and their new owners hold them:
//   1. the grace period has passed (`now_unix_ms` against p.not_before_ms; the config server's
//      settle window after a takeover, `settling_left_ns`, too);
//   2. every node that is waited for (up and not LAGGING) runs p.version;
//   3. the server is up and connected, and its stream is done at p.version or a later one.
struct PurgeWaits {
  std::vector<std::string> waits;
  bool held = false;
};
PurgeWaits purge_waits(const PendingPurge& p, const NodeRegistry& nodes, uint64_t now_unix_ms,
                       int64_t settling_left_ns);

// Whether the streams of table `version` (`current`) still run: a hash server of `streamers` (the
// table before it: every one of them is told to stream) has not reported its stream done at
// `version` or a later one. Not one purging everything or not yet heard from since it registered
// (not told to stream), nor a cancelled stream (held for the operator), nor a server DOWN or
// disconnected that `current` no longer has; one that it has streams again when it is back. While
// they run, a record not yet streamed is only at its earlier owners, where login servers read it
// during the grace period: the config server extends that period (ClusterController::
// extend_grace).
bool streams_running(const Table& streamers, const Table& current, const NodeRegistry& nodes,
                     uint64_t version);

// A purge report from `n`: each shard's latest state is kept. True when it completes the purge of
// everything `n` was sent on its return (n.rejoin_purge_id): every shard it has reports that id
// done; a report of an earlier purge, or from before this one started, does not count.
bool record_purge_report(NodeRecord& n, const control::PurgeReport& report);

// Whether a server being drained (out of the table, its automatic purge sent: `purge_sent`) is
// empty: no purge pending for it any more, it is not purging everything, and it says it holds no
// records (`records`, from its latest heartbeat; nullopt: not said).
bool drained(bool purge_sent, bool purge_pending, const NodeRecord* n,
             std::optional<double> records);

}  // namespace imhash::cluster
