// Router: a routing table compiled for lookups — which hash server (and which of its shards) owns
// a user id. Immutable after construction: compile one per table version and share it across
// threads as std::shared_ptr<const Router>; a thread swaps its pointer when a new version arrives,
// and lookups in flight finish on the router they started with. All methods are const and any
// thread may call them.
//
// The owner functions are part of the protocol between login and hash servers and are pinned by
// golden values (tests/unit/router_test.cpp):
//   modulo: servers[mix64(id, kRouting) % N], or servers[id % N] with modulo_hash "identity".
//   range:  the server of the inclusive range containing id (binary search).
//   ring:   Maglev hashing (Eisenbud et al., NSDI'16) over a lookup table of 65537 slots. A server
//           is identified by its NAME only (not its position in the list, address or shards), so
//           reordering servers changes nothing; a server of weight w takes w turns per round.
//           id -> slot is fast_range(mix64(id, kRing), 65537).
// The shard inside the owner is shard_of(id, owner's shards) (common/routing/shard_map.h) in every
// mode.
//
// Replicas (table.replicas = R > 1): an id's record lives on R distinct servers, its replica set,
// owner first (the primary). Also pinned by golden values:
//   modulo, range: the owner at index i, then servers[(i + 1) % N], servers[(i + 2) % N] ...
//   ring:   the owner of the id's slot, then the owners of the slots after it (slot + 1, + 2 ...,
//           mod 65537) that are not in the set yet: names only, like the ring itself.
// A replica's shard is shard_of(id, that server's shards), as for the owner.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/routing/table.h"

namespace imhash {

struct Route {
  uint32_t server = 0;  // index into table().servers
  uint32_t shard = 0;

  bool operator==(const Route&) const = default;
};

// An id's replica set: routes[0] is the owner (primary), then the replicas in order.
struct ReplicaSet {
  std::array<Route, kMaxReplicas> routes{};
  uint32_t size = 0;

  bool contains(uint32_t server) const {
    for (uint32_t i = 0; i < size; ++i) {
      if (routes[i].server == server) return true;
    }
    return false;
  }
};

class Router {
 public:
  static constexpr uint32_t kRingSize = 65537;  // Maglev lookup table size (prime)

  // `table` must be valid (parse_table_json and the edit functions only return valid tables);
  // throws std::invalid_argument with validate()'s message otherwise.
  static std::shared_ptr<const Router> compile(Table table);

  uint32_t owner(uint64_t id) const;  // server index
  Route route(uint64_t id) const;     // owner + shard_of(id, servers[owner].shards)
  const ServerInfo& owner_info(uint64_t id) const { return table_.servers[owner(id)]; }
  bool owns(uint64_t id, std::string_view server_name) const;
  // The owner and its replicas (size() == replicas()).
  ReplicaSet replica_set(uint64_t id) const;
  // Whether server `server` (an index) holds id's record: its owner or one of its replicas.
  bool holds(uint64_t id, uint32_t server) const {
    return replicas_ == 1 ? owner(id) == server : replica_set(id).contains(server);
  }
  uint32_t replicas() const { return replicas_; }

  const Table& table() const { return table_; }
  uint64_t version() const { return table_.version; }
  RoutingMode mode() const { return table_.mode; }

 private:
  explicit Router(Table table);
  void build_ring();

  // Constant after construction.
  Table table_;
  uint32_t server_count_ = 0;
  uint32_t replicas_ = 1;
  std::vector<uint64_t> range_hi_;     // range mode: inclusive upper bounds, ascending
  std::vector<uint32_t> range_owner_;  // range mode: server index of each range
  std::vector<uint16_t> ring_;         // ring mode: slot -> server index (kMaxServers <= 65535)
};

}  // namespace imhash
