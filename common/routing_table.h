// The routing table (HASH_SELECT, DESIGN §3): a version, a mode and the hash servers, plus the id
// ranges of range mode. A plain value type: copy it freely; any thread may use its own copy.
// Lookups go through the immutable Router compiled from a table (common/router.h), not through this
// type.
//
// Every function here that takes operator or network input returns errors as values (an empty
// string or a TableResult with `error` set); none of them throws on bad input.
//
// JSON file format (what parse_table_json reads and table_to_json writes):
//
//   {
//     "version": 3,                     // required, integer 0 .. 2^64-1
//     "mode": "range",                  // required: "modulo" | "range" | "ring"
//     "modulo_hash": "mix",             // optional: "mix" (default) | "identity" (plain id mod N)
//     "servers": [                      // required, 1 .. 1024 entries
//       {"name": "hash1",               // required: 1..64 chars of [A-Za-z0-9._-], unique
//        "address": "127.0.0.1:7001",   // optional, default "": "HOST:PORT" of its TCP listener
//        "shards": 4,                   // optional, default 1, 1 .. 1024
//        "weight": 1}                   // optional, default 1, 1 .. 1000 (used by ring mode)
//     ],
//     "ranges": [                       // range mode only (required there, absent otherwise):
//       {"lo": 0, "hi": 9223372036854775807, "server": "hash1"},     // inclusive, sorted, covering
//       {"lo": 9223372036854775808, "hi": 18446744073709551615, "server": "hash2"}  // 0..2^64-1
//     ]
//   }
//
// Ids are plain JSON integers (no quotes); negative numbers, fractions and exponents are rejected.
// Unknown and duplicate keys are rejected with an error naming the key, so that a typo in an
// operator's file is loud. (The // comments above are explanation only; the format is strict JSON.)
#pragma once

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
};

TableResult parse_table_json(std::string_view json);   // parses and validates
std::string table_to_json(const Table& table);         // one server / range per line; round-trips
TableResult load_table_file(const std::string& path);  // errors mention the path

// Range edits for the config server and imctl. Each returns a new valid table or an error; the
// version is NOT bumped (the caller does that). All need range mode.
//
// [lo, hi] goes to `server`; ranges it cuts are split, and the new range is then merged with a
// neighbour of the same server. Ranges elsewhere are left as they are (splits stay split).
TableResult assign_range(const Table& table, uint64_t lo, uint64_t hi, std::string_view server);
// The range containing `at` becomes [lo, at-1] and [at, hi]; an error if `at` already starts one.
TableResult split_range(const Table& table, uint64_t at);
// The ranges lying wholly inside [lo, hi] (at least two) become one; an error if they belong to
// different servers.
TableResult merge_ranges(const Table& table, uint64_t lo, uint64_t hi);

// Server and mode edits (same contract: a new valid table or an error, version not bumped).
// Switching to range mode with no ranges uses even_ranges(); switching away drops the ranges.
TableResult set_mode(const Table& table, RoutingMode mode);
// Appends a server. In range mode it owns nothing until ranges are assigned to it.
TableResult add_server(const Table& table, ServerInfo server);
// Removes a server. In range mode each of its ranges is split evenly among the remaining servers
// (in table order, starting one further along for each range, so the load spreads).
TableResult remove_server(const Table& table, std::string_view name);

// A server name: 1..kMaxServerNameLength characters of A-Z a-z 0-9 . _ -
bool is_valid_server_name(std::string_view name);

// Initial ranges for range mode: the id space split evenly over the servers, in table order
// (weights are not used). Empty if there are no servers.
std::vector<IdRange> even_ranges(const std::vector<ServerInfo>& servers);

const char* to_string(RoutingMode mode);
std::optional<RoutingMode> parse_mode(std::string_view text);
const char* to_string(ModuloHash hash);
std::optional<ModuloHash> parse_modulo_hash(std::string_view text);

// "LO-HI" (inclusive, decimal) or a single "ID", as imctl's `assign 1-2000 hash4` writes it.
// nullopt if malformed or LO > HI.
std::optional<std::pair<uint64_t, uint64_t>> parse_id_range(std::string_view text);
std::string format_id_range(uint64_t lo, uint64_t hi);  // "LO-HI"

}  // namespace imhash
