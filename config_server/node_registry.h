// NodeRegistry: the config server's book of the nodes that dialled in, and its rules about them
// (docs/design.md §5): who may register under a name, which version a node is taken to run, when
// a node is DOWN and when it is LAGGING, and when a version has reached every node that counts.
//
// A core, as login_server/request_flow.h is: no socket, no clock, no log. Time comes in with each
// call (steady-clock nanoseconds); what changed comes back as values, and the caller
// (ConfigService) logs it and acts on it. A node's link is a LinkId the adapter hands out, never a
// pointer to it. config_server/CMakeLists.txt builds it so that an include of Asio, Beast or
// spdlog fails, and a unit test checks that it names no clock.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/json/object.hpp>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/routing/control_protocol.h"

namespace imhash::cluster {

// A node link, as the adapter numbers them from 1; 0: none.
using LinkId = uint64_t;

// A node is known by its role and its name: a hash server and a login server may share a name.
struct NodeKey {
  Role role = Role::kHash;
  std::string name;
  // Hash servers first, then login servers, each by name: the order imctl status, the status page
  // and /metrics list nodes in. Not Role's order: its values are a byte on the wire, login first.
  std::strong_ordering operator<=>(const NodeKey& o) const {
    if (const auto by_role = (role == Role::kLogin) <=> (o.role == Role::kLogin); by_role != 0) {
      return by_role;
    }
    return name <=> o.name;
  }
  bool operator==(const NodeKey&) const = default;
  std::string text() const;  // "hash/hash1", as logs and imctl show it
};

// What the config server knows of one node.
struct NodeRecord {
  Role role = Role::kHash;
  std::string name;
  std::string address;
  uint32_t shards = 0;
  uint64_t pid = 0;
  uint64_t version = 0;  // acknowledged
  int64_t last_heard_ns = 0;
  int64_t last_push_ns = 0;
  bool up = false;
  // Behind the current version since (0: it runs it); LAGGING once that lasts the DOWN window.
  int64_t behind_since_ns = 0;
  bool lagging = false;
  int64_t last_rejected_log_ns = 0;  // versions above the latest pushed: logged once a second
  // Purging everything after it came back removed: the id of that purge (0: none). Done only
  // when every shard reports that id done.
  uint64_t rejoin_purge_id = 0;
  boost::json::object stats;
  // A login server's writes held for each hash server (control::Heartbeat::held_writes), and
  // when its latest heartbeat came.
  std::map<std::string, uint64_t> held_writes;
  int64_t heartbeat_ns = 0;
  // Requests per second, from the request counters of two successive heartbeats.
  double requests_per_s = 0;
  double last_requests = -1;
  int64_t last_requests_ns = 0;
  std::vector<control::PurgeShard> purges;  // by shard, latest report of each
  // Its latest stream report since it registered (a hash server sends one after registering).
  std::optional<control::StreamReport> stream;
  int64_t stream_heard_ns = 0;
  LinkId link = 0;  // the link it registered on, while that is open

  NodeKey key() const { return {role, name}; }
  bool is_hash() const { return role == Role::kHash; }
  // A hash server that sent a stream report since it registered knows streams (it sends one right
  // after registering). One that never does is of a version before streams, which closes its
  // link on a message it does not know: it is sent no stream command, and its automatic purge
  // waits (an operator purges it by hand).
  bool streams_known() const { return stream.has_value(); }
  // Up and not LAGGING: a node convergence and the automatic purge wait for.
  bool waited_for() const { return up && !lagging; }
};

// Where a version a node names (in a register, heartbeat or ack) came from, for the counts of
// rejected ones.
enum class VersionSource : uint8_t { kRegister, kHeartbeat, kAck };
inline constexpr size_t kVersionSources = 3;
const char* version_source_name(VersionSource from);

// What NodeRegistry::take_version made of a version a node names.
enum class VersionTaken : uint8_t {
  kTaken,     // recorded (a lower one than it had does not lower it: heartbeats and acks cross)
  kCaughtUp,  // recorded, and the node was LAGGING and runs the latest version now
  kRejected,  // above the latest version pushed: nothing above it can have been installed
};

class NodeRegistry {
 public:
  // A node is DOWN once it has not been heard for `down_after_ns`, and LAGGING once it has been
  // behind the latest version that long.
  explicit NodeRegistry(int64_t down_after_ns) : down_after_ns_(down_after_ns) {}

  NodeRecord* find(const NodeKey& key);
  const NodeRecord* find(const NodeKey& key) const;
  // The node registered on `link`, if any (every message of a node asks: constant time).
  NodeRecord* on_link(LinkId link);
  std::map<NodeKey, NodeRecord>& nodes() { return nodes_; }
  const std::map<NodeKey, NodeRecord>& nodes() const { return nodes_; }
  void clear();

  // Whether a registration as `key` on link `asking` is refused: the name is held by a live link
  // (another link than `asking`, still open, of a node that is not DOWN). The newcomer tries again
  // after its back-off and takes the name over once that link has closed or the holder is DOWN.
  bool name_held(const NodeKey& key, LinkId asking, bool holder_link_open) const;

  struct Registration {
    NodeRecord& node;
    bool was_up = false;
    LinkId replaced_link = 0;  // an older link of the node, to be closed (0: none)
    VersionTaken version = VersionTaken::kTaken;
  };
  // A node registered on `link` (its name not held, see name_held). It may be another process:
  // its version is what it says now (unless above `latest`, the latest version pushed), and its
  // stream and purge progress are what it reports from now on. A LAGGING node stays LAGGING: a
  // node that reconnects again and again does not restart the window.
  Registration on_register(const control::Register& reg, LinkId link, int64_t now_ns,
                           uint64_t latest);
  // The node's link closed: it stays known (and up until the heartbeat rule says DOWN).
  void on_link_closed(LinkId link);
  // A message from a registered node: true if it was DOWN and is up again.
  bool on_heard(NodeRecord& n, int64_t now_ns);

  // A register, heartbeat or ack says `n` runs `version`; `latest` is the latest version pushed.
  // A rejected one is counted by `from`.
  VersionTaken take_version(NodeRecord& n, VersionSource from, uint64_t version, uint64_t latest);
  // Whether a rejection is to be logged now: at most once a second for one node.
  static bool log_rejection(NodeRecord& n, int64_t now_ns);
  uint64_t rejected(VersionSource from) const { return rejected_[static_cast<size_t>(from)]; }

  // The latest version was pushed to `n` now.
  static void on_pushed(NodeRecord& n, int64_t now_ns, uint64_t latest);
  // A heartbeat's counters: the node's requests per second, averaged over at least a second
  // (nodes sample their counters twice a second, so two heartbeats in a row may carry the same
  // figures). Hash servers count upserts, gets and deletes; login servers count datagrams.
  static void update_rate(NodeRecord& n, int64_t now_ns);

  // The nodes that were up and have not been heard for the DOWN window, counted from
  // `listening_since_ns` for all (the config server's loop stalled then, and what the nodes sent
  // meanwhile was still unread): now DOWN.
  std::vector<NodeKey> mark_down(int64_t now_ns, int64_t listening_since_ns);
  // The nodes that are up and have been behind `latest` for the DOWN window since it was pushed to
  // them (or they were first seen behind): now LAGGING. They heartbeat, so they are not DOWN; but
  // a node that never installs the table must not hold up convergence or the automatic purge.
  std::vector<NodeKey> mark_lagging(int64_t now_ns, uint64_t latest);

  // Convergence: how long version `version` took to reach every node that is waited for.
  void start_convergence(uint64_t version, int64_t now_ns);
  // The milliseconds version `version` took, once, when every node that is waited for runs it
  // (nullopt: not now — not reached yet, reached before, or another version is tracked).
  std::optional<double> check_convergence(int64_t now_ns);
  uint64_t convergence_version() const { return convergence_.version; }
  std::optional<double> convergence_ms() const { return convergence_.reached_ms; }
  // Every node that is waited for runs `version`.
  bool converged(uint64_t version) const;

 private:
  struct Convergence {
    uint64_t version = 0;
    int64_t started_ns = 0;
    std::optional<double> reached_ms;
  };

  const int64_t down_after_ns_;
  std::map<NodeKey, NodeRecord> nodes_;
  // The node on each open link (records in a std::map stay where they are).
  std::unordered_map<LinkId, NodeRecord*> by_link_;
  Convergence convergence_;
  uint64_t rejected_[kVersionSources] = {0, 0, 0};
};

}  // namespace imhash::cluster
