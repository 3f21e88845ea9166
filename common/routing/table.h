// The routing table (HASH_SELECT, docs/design.md §3): a version, a mode and the hash servers, plus
// the id ranges of range mode, and validate(), the rules every table obeys. A plain value type:
// copy it freely; any thread may use its own copy. Lookups go through the immutable Router compiled
// from a table (common/routing/router.h), not through this type.
//
// The table's words in text are in common/routing/table_text.h, its JSON form (the table file) in
// common/routing/table_json.h, and the edits of the config server and imctl in
// config_server/table_edits.h; common/routing/routing_table.h brings the first three at once.
//
// Every function that takes operator or network input returns errors as values (an empty string or
// a TableResult with `error` set); none of them throws on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace imhash {

inline constexpr uint32_t kMaxServers = 1024;
inline constexpr uint32_t kMaxShards = 1024;
inline constexpr uint32_t kMaxWeight = 1000;
// Ring mode: the sum of the weights is capped so that each unit of weight still gets at least 16 of
// the ring's 65537 slots; beyond that the balance guarantee of the ring degrades.
inline constexpr uint32_t kMaxRingTotalWeight = 4096;
inline constexpr size_t kMaxServerNameLength = 64;
// Copies of each record (the replication factor, docs/design.md §3 "Replicas"): 1 is no replica.
inline constexpr uint32_t kMaxReplicas = 3;

enum class RoutingMode : uint8_t { kModulo, kRange, kRing };
enum class ModuloHash : uint8_t { kMix, kIdentity };  // kIdentity = classic id mod N

struct ServerInfo {
  std::string name;
  std::string address;  // "host:port" of its TCP listener; may be empty for hash-server-only use
  uint32_t shards = 1;
  uint32_t weight = 1;

  bool operator==(const ServerInfo&) const = default;
};

struct IdRange {
  uint64_t lo = 0;
  uint64_t hi = 0;  // inclusive
  std::string server;

  bool operator==(const IdRange&) const = default;
};

struct Table {
  uint64_t version = 0;
  RoutingMode mode = RoutingMode::kModulo;
  ModuloHash modulo_hash = ModuloHash::kMix;
  std::vector<ServerInfo> servers;
  std::vector<IdRange> ranges;  // range mode only; must be empty in the other modes
  // Servers holding each record: its owner (the primary) and replicas - 1 more
  // (common/routing/router.h).
  uint32_t replicas = 1;

  const ServerInfo* find_server(std::string_view name) const;  // nullptr if none
  int server_index(std::string_view name) const;               // -1 if none

  bool operator==(const Table&) const = default;
};

// "" if the table is valid; otherwise one sentence saying what is wrong (the first problem found).
std::string validate(const Table& table);

struct TableResult {
  std::optional<Table> table;
  std::string error;  // set iff !table

  bool ok() const { return table.has_value(); }

  static TableResult failure(std::string error) { return {std::nullopt, std::move(error)}; }
  // `table` if it is valid, else validate()'s sentence.
  static TableResult checked(Table table);
};

}  // namespace imhash
