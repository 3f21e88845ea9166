// Edits of a routing table, which only the config server and imctl make. Each returns a new valid
// table or an error (a TableResult); the version is NOT bumped (the caller does that). Pure; any
// thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/table.h"

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
// Removes a server. In range mode each of its ranges is split evenly among the remaining servers
// (in table order, starting one further along for each range, so the load spreads).
TableResult remove_server(const Table& table, std::string_view name);

// Initial ranges for range mode: the id space split evenly over the servers, in table order
// (weights are not used). Empty if there are no servers.
std::vector<IdRange> even_ranges(const std::vector<ServerInfo>& servers);

}  // namespace imhash
