#include "config_server/table_edits.h"

#include <algorithm>
#include <string>

#include "common/codec/hash.h"
#include "common/codec/printable.h"
#include "common/routing/table_text.h"

namespace imhash {

namespace {

// Merges ranges[i] into its neighbours when they name the same server; used after an edit so the
// edited piece joins its neighbours without undoing deliberate splits elsewhere.
void merge_with_neighbours(std::vector<IdRange>& ranges, size_t i) {
  if (i + 1 < ranges.size() && ranges[i + 1].server == ranges[i].server) {
    ranges[i].hi = ranges[i + 1].hi;
    ranges.erase(ranges.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  if (i > 0 && ranges[i - 1].server == ranges[i].server) {
    ranges[i - 1].hi = ranges[i].hi;
    ranges.erase(ranges.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// "" if the table is valid and in range mode; `what` names the operation for the message.
std::string need_range_table(const Table& table, const char* what) {
  if (table.mode != RoutingMode::kRange) {
    return std::string("cannot ") + what + ": the table is in " + to_string(table.mode) +
           " mode, not range mode";
  }
  std::string error = validate(table);
  if (!error.empty()) return std::string("cannot ") + what + ": the table is invalid: " + error;
  return {};
}

// Index of the range containing `id`; the ranges must cover the id space.
size_t range_index(const std::vector<IdRange>& ranges, uint64_t id) {
  auto it = std::lower_bound(ranges.begin(), ranges.end(), id,
                             [](const IdRange& r, uint64_t v) { return r.hi < v; });
  return static_cast<size_t>(it - ranges.begin());
}

// "1 copy", "3 copies".
std::string copies(uint32_t n) { return std::to_string(n) + (n == 1 ? " copy" : " copies"); }

}  // namespace

TableResult assign_range(const Table& table, uint64_t lo, uint64_t hi, std::string_view server) {
  if (std::string error = need_range_table(table, "assign"); !error.empty())
    return TableResult::failure(error);
  if (lo > hi)
    return TableResult::failure("cannot assign " + format_id_range(lo, hi) +
                                ": it ends before it starts");
  if (table.server_index(server) < 0) {
    return TableResult::failure("cannot assign " + format_id_range(lo, hi) +
                                ": there is no server named " + quoted_value(server));
  }
  Table out = table;
  out.ranges.clear();
  size_t placed = 0;
  bool done = false;
  for (const IdRange& r : table.ranges) {
    if (r.hi < lo) {
      out.ranges.push_back(r);
      continue;
    }
    if (r.lo < lo) out.ranges.push_back({r.lo, lo - 1, r.server});
    if (!done) {
      placed = out.ranges.size();
      out.ranges.push_back({lo, hi, std::string(server)});
      done = true;
    }
    if (r.lo > hi) {
      out.ranges.push_back(r);
    } else if (r.hi > hi) {
      out.ranges.push_back({hi + 1, r.hi, r.server});
    }
  }
  merge_with_neighbours(out.ranges, placed);
  return TableResult::checked(std::move(out));
}

TableResult split_range(const Table& table, uint64_t at) {
  if (std::string error = need_range_table(table, "split"); !error.empty())
    return TableResult::failure(error);
  size_t i = range_index(table.ranges, at);
  const IdRange& r = table.ranges[i];
  if (r.lo == at) {
    return TableResult::failure("cannot split at " + std::to_string(at) + ": ranges[" +
                                std::to_string(i) + "] " + describe_range(r) +
                                " already starts there");
  }
  Table out = table;
  out.ranges[i].hi = at - 1;
  out.ranges.insert(out.ranges.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                    IdRange{at, r.hi, r.server});
  return TableResult::checked(std::move(out));
}

TableResult merge_ranges(const Table& table, uint64_t lo, uint64_t hi) {
  if (std::string error = need_range_table(table, "merge"); !error.empty())
    return TableResult::failure(error);
  std::string what = "cannot merge " + format_id_range(lo, hi);
  if (lo > hi) return TableResult::failure(what + ": it ends before it starts");
  size_t first = table.ranges.size(), last = 0;
  for (size_t i = 0; i < table.ranges.size(); ++i) {
    if (table.ranges[i].lo >= lo && table.ranges[i].hi <= hi) {
      first = std::min(first, i);
      last = i;
    }
  }
  if (first == table.ranges.size() || first == last) {
    return TableResult::failure(what + ": fewer than two ranges lie wholly inside it");
  }
  for (size_t i = first + 1; i <= last; ++i) {
    if (table.ranges[i].server != table.ranges[first].server) {
      return TableResult::failure(
          what + ": ranges[" + std::to_string(first) + "] " + describe_range(table.ranges[first]) +
          " and ranges[" + std::to_string(i) + "] " + describe_range(table.ranges[i]) +
          " belong to different servers; assign the whole range to one server instead");
    }
  }
  Table out = table;
  out.ranges[first].hi = table.ranges[last].hi;
  out.ranges.erase(out.ranges.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                   out.ranges.begin() + static_cast<std::ptrdiff_t>(last) + 1);
  return TableResult::checked(std::move(out));
}

TableResult set_mode(const Table& table, RoutingMode mode) {
  Table out = table;
  out.mode = mode;
  if (mode != RoutingMode::kRange) {
    out.ranges.clear();
  } else if (out.ranges.empty()) {
    out.ranges = even_ranges(out.servers);
  }
  TableResult result = TableResult::checked(std::move(out));
  if (!result.ok())
    result.error = std::string("cannot switch to ") + to_string(mode) + " mode: " + result.error;
  return result;
}

TableResult add_server(const Table& table, ServerInfo server) {
  if (table.find_server(server.name)) {
    return TableResult::failure("cannot add server " + quoted_value(server.name) +
                                ": a server of that name exists");
  }
  Table out = table;
  std::string name = server.name;
  out.servers.push_back(std::move(server));
  TableResult result = TableResult::checked(std::move(out));
  if (!result.ok()) result.error = "cannot add server " + quoted_value(name) + ": " + result.error;
  return result;
}

TableResult set_server(const Table& table, std::string_view name,
                       const std::optional<std::string>& address,
                       const std::optional<uint32_t>& weight) {
  const std::string what = "cannot change server " + quoted_value(name);
  const int index = table.server_index(name);
  if (index < 0) return TableResult::failure(what + ": there is no server of that name");
  Table out = table;
  ServerInfo& s = out.servers[static_cast<size_t>(index)];
  const ServerInfo before = s;
  if (address) s.address = *address;
  if (weight) s.weight = *weight;
  if (s == before) return TableResult::failure(what + ": it already has that address and weight");
  TableResult result = TableResult::checked(std::move(out));
  if (!result.ok()) result.error = what + ": " + result.error;
  return result;
}

TableResult remove_server(const Table& table, std::string_view name) {
  std::string what = "cannot remove server " + quoted_value(name);
  int index = table.server_index(name);
  if (index < 0) return TableResult::failure(what + ": there is no server of that name");
  if (table.servers.size() == 1) return TableResult::failure(what + ": it is the last one");
  // Said here rather than by validate(): the way out is to lower replicas first, not to keep the
  // server.
  if (const size_t left = table.servers.size() - 1; left < table.replicas) {
    return TableResult::failure(what + ": " + replicas_exceed_servers(table.replicas, left));
  }
  Table out = table;
  out.servers.erase(out.servers.begin() + index);
  if (table.mode == RoutingMode::kRange) {
    const size_t survivors = out.servers.size();
    out.ranges.clear();
    std::vector<bool> fresh;  // pieces handed over, which may merge with their neighbours
    size_t turn = 0;
    for (const IdRange& r : table.ranges) {
      if (r.server != name) {
        out.ranges.push_back(r);
        fresh.push_back(false);
        continue;
      }
      const uint128 length = uint128{r.hi} - r.lo + 1;
      const uint128 pieces = std::min<uint128>(survivors, length);
      for (uint128 j = 0; j < pieces; ++j) {
        const uint64_t lo = r.lo + static_cast<uint64_t>(length * j / pieces);
        const uint64_t hi = r.lo + static_cast<uint64_t>(length * (j + 1) / pieces - 1);
        out.ranges.push_back(
            {lo, hi, out.servers[(turn + static_cast<size_t>(j)) % survivors].name});
        fresh.push_back(true);
      }
      ++turn;
    }
    std::vector<IdRange> merged;
    std::vector<bool> merged_fresh;
    for (size_t i = 0; i < out.ranges.size(); ++i) {
      if (!merged.empty() && (fresh[i] || merged_fresh.back()) &&
          merged.back().server == out.ranges[i].server) {
        merged.back().hi = out.ranges[i].hi;
        merged_fresh.back() = true;
      } else {
        merged.push_back(std::move(out.ranges[i]));
        merged_fresh.push_back(fresh[i]);
      }
    }
    out.ranges = std::move(merged);
  }
  TableResult result = TableResult::checked(std::move(out));
  if (!result.ok()) result.error = what + ": " + result.error;
  return result;
}

TableResult set_replicas(const Table& table, uint32_t replicas) {
  const std::string what = "cannot set replicas " + std::to_string(replicas);
  if (table.replicas == replicas) {
    return TableResult::failure(what + ": the table already keeps " + copies(replicas) +
                                " of each record");
  }
  Table out = table;
  out.replicas = replicas;
  TableResult result = TableResult::checked(std::move(out));
  if (!result.ok()) result.error = what + ": " + result.error;
  return result;
}

std::string replicas_exceed_servers(uint32_t replicas, size_t servers) {
  return "the table keeps " + copies(replicas) + " of each record and would have only " +
         std::to_string(servers) + (servers == 1 ? " server" : " servers") +
         ": lower replicas first (imctl replicas " + std::to_string(servers) + ")";
}

std::vector<IdRange> even_ranges(const std::vector<ServerInfo>& servers) {
  std::vector<IdRange> ranges;
  const uint128 n = servers.size();
  for (size_t i = 0; i < servers.size(); ++i) {
    const uint128 lo = (uint128{i} << 64) / n;
    const uint128 end = (uint128{i + 1} << 64) / n;  // exclusive
    if (end == lo) continue;  // more servers than ids: impossible in practice
    ranges.push_back({static_cast<uint64_t>(lo), static_cast<uint64_t>(end - 1), servers[i].name});
  }
  return ranges;
}

}  // namespace imhash
