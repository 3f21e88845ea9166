// Edits of a routing table, which only the config server and imctl make. Each returns a new valid
// table or an error (a TableResult); the version is NOT bumped (the caller does that). Pure; any
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/routing/table.h"

namespace imhash {

// Range edits; all need range mode.
//
// [lo, hi] goes to `server`; ranges it cuts are split, and the new range is then merged with a
// neighbour of the same server. Ranges elsewhere are left as they are (splits stay split).
TableResult assign_range(const Table& table, uint64_t lo, uint64_t hi, std::string_view server);
// The range containing `at` becomes [lo, at-1] and [at, hi]; an error if `at` already starts one.
TableResult split_range(const Table& table, uint64_t at);
// The ranges lying wholly inside [lo, hi] (at least two) become one; an error if they belong to
// different servers.
TableResult merge_ranges(const Table& table, uint64_t lo, uint64_t hi);

// Server and mode edits.
// Switching to range mode with no ranges uses even_ranges(); switching away drops the ranges.
TableResult set_mode(const Table& table, RoutingMode mode);
// Appends a server. In range mode it owns nothing until ranges are assigned to it.
TableResult add_server(const Table& table, ServerInfo server);
// Changes a server in place: its address, its weight, or both (nullopt: kept). Its place in the
// table, its shard count and its ranges stay, so an address change moves no id; a weight change
// moves ids in ring mode only (modulo and range modes do not use weights). An error if nothing
// would change.
TableResult set_server(const Table& table, std::string_view name,
                       const std::optional<std::string>& address,
                       const std::optional<uint32_t>& weight);
// Removes a server. In range mode each of its ranges is split evenly among the remaining servers
// (in table order, starting one further along for each range, so the load spreads). An error if
// fewer servers would remain than the table keeps copies of each record (replicas).
TableResult remove_server(const Table& table, std::string_view name);
// The number of copies of each record (the owner and replicas - 1 more, common/routing/router.h).
// An error if the table already keeps that many, or validate()'s (1..kMaxReplicas, and no more than
// there are servers).
TableResult set_replicas(const Table& table, uint32_t replicas);
// Why a removal that would leave `servers` servers for `replicas` copies of each record is refused:
// "the table keeps 3 copies of each record and would have only 2 servers: lower replicas first
// (imctl replicas 2)". The config server says it for a removal of several servers at once, and
// when it does not fail a DOWN server over.
std::string replicas_exceed_servers(uint32_t replicas, size_t servers);

// Initial ranges for range mode: the id space split evenly over the servers, in table order
// (weights are not used). Empty if there are no servers.
std::vector<IdRange> even_ranges(const std::vector<ServerInfo>& servers);

}  // namespace imhash
