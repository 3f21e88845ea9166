#include "common/routing/table.h"

#include <algorithm>
#include <limits>

#include "common/codec/endpoint.h"
#include "common/codec/printable.h"
#include "common/routing/table_text.h"

namespace imhash {

namespace {

constexpr uint64_t kMaxId = std::numeric_limits<uint64_t>::max();

}  // namespace

const ServerInfo* Table::find_server(std::string_view name) const {
  int i = server_index(name);
  return i < 0 ? nullptr : &servers[static_cast<size_t>(i)];
}

int Table::server_index(std::string_view name) const {
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

TableResult TableResult::checked(Table table) {
  std::string error = validate(table);
  if (!error.empty()) return failure(std::move(error));
  return TableResult{std::move(table), {}};
}

std::string validate(const Table& table) {
  if (table.servers.empty()) return "the table has no servers";
  if (table.servers.size() > kMaxServers) {
    return "the table has " + std::to_string(table.servers.size()) + " servers; at most " +
           std::to_string(kMaxServers) + " are allowed";
  }
  uint64_t total_weight = 0;
  for (size_t i = 0; i < table.servers.size(); ++i) {
    const ServerInfo& s = table.servers[i];
    std::string where = "servers[" + std::to_string(i) + "]";
    if (!is_valid_server_name(s.name)) {
      return where + " has the name " + quoted_value(s.name) + "; a name is " +
             std::string(kServerNameRule);
    }
    where += " (" + s.name + ")";
    for (size_t j = 0; j < i; ++j) {
      if (table.servers[j].name == s.name) {
        return "server name " + quoted_value(s.name) + " appears twice (servers[" +
               std::to_string(j) + "] and servers[" + std::to_string(i) + "])";
      }
      if (!s.address.empty() && table.servers[j].address == s.address) {
        return "servers " + table.servers[j].name + " and " + s.name + " have the same address " +
               s.address;
      }
    }
    if (std::string problem = s.address.empty() ? "" : check_host_port(s.address);
        !problem.empty()) {
      return where + ": address " + quoted_value(s.address) + " " + problem;
    }
    if (s.shards == 0 || s.shards > kMaxShards) {
      return where + " has " + std::to_string(s.shards) + " shards; it needs 1 to " +
             std::to_string(kMaxShards);
    }
    if (s.weight == 0 || s.weight > kMaxWeight) {
      return where + " has weight " + std::to_string(s.weight) + "; it needs 1 to " +
             std::to_string(kMaxWeight);
    }
    total_weight += s.weight;
  }

  if (table.replicas == 0 || table.replicas > kMaxReplicas) {
    return "the table has replicas " + std::to_string(table.replicas) + "; it needs 1 to " +
           std::to_string(kMaxReplicas);
  }
  if (table.replicas > table.servers.size()) {
    return "the table keeps " + std::to_string(table.replicas) +
           " copies of each record (replicas) but has only " +
           std::to_string(table.servers.size()) + " server" +
           (table.servers.size() == 1 ? "" : "s") + "; each copy needs its own server";
  }
  if (table.mode == RoutingMode::kRing && total_weight > kMaxRingTotalWeight) {
    return "the servers' weights add up to " + std::to_string(total_weight) +
           "; ring mode allows at most " + std::to_string(kMaxRingTotalWeight);
  }
  if (table.mode != RoutingMode::kRange) {
    if (!table.ranges.empty()) {
      return std::string("the table has ranges but is in ") + to_string(table.mode) +
             " mode; ranges are only used in range mode";
    }
    return {};
  }

  if (table.ranges.empty()) {
    return "range mode needs ranges covering the ids 0-18446744073709551615, and there are none";
  }
  auto where = [&table](size_t i) {
    return "ranges[" + std::to_string(i) + "] " + describe_range(table.ranges[i]);
  };
  for (size_t i = 0; i < table.ranges.size(); ++i) {
    const IdRange& r = table.ranges[i];
    if (r.lo > r.hi) return where(i) + " ends before it starts";
    if (table.server_index(r.server) < 0) {
      return where(i) + " names the unknown server " + quoted_value(r.server);
    }
  }
  for (size_t i = 1; i < table.ranges.size(); ++i) {
    if (table.ranges[i].lo < table.ranges[i - 1].lo) {
      return "the ranges are not sorted: " + where(i) + " starts before " + where(i - 1);
    }
  }
  if (table.ranges.front().lo != 0) {
    return "the ids " + format_id_range(0, table.ranges.front().lo - 1) + " are not in any range";
  }
  for (size_t i = 1; i < table.ranges.size(); ++i) {
    const IdRange& r = table.ranges[i];
    const IdRange& prev = table.ranges[i - 1];
    if (r.lo <= prev.hi) {
      return "the ids " + format_id_range(r.lo, std::min(r.hi, prev.hi)) + " are in both " +
             where(i - 1) + " and " + where(i);
    }
    if (r.lo - 1 != prev.hi) {
      return "the ids " + format_id_range(prev.hi + 1, r.lo - 1) +
             " are not in any range (a gap between ranges[" + std::to_string(i - 1) +
             "] and ranges[" + std::to_string(i) + "])";
    }
  }
  if (table.ranges.back().hi != kMaxId) {
    return "the ids " + format_id_range(table.ranges.back().hi + 1, kMaxId) +
           " are not in any range";
  }
  return {};
}

}  // namespace imhash
