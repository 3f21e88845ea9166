#include "common/routing_table.h"

#include <algorithm>
#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <sstream>

#include "common/endpoint.h"
#include "common/hash.h"
#include "common/json_check.h"

namespace imhash {

namespace json = boost::json;

namespace {

constexpr uint64_t kMaxId = std::numeric_limits<uint64_t>::max();
constexpr size_t kMaxJsonBytes = 16 << 20;

TableResult fail(std::string error) { return TableResult{std::nullopt, std::move(error)}; }

TableResult checked(Table table) {
  std::string error = validate(table);
  if (!error.empty()) return fail(std::move(error));
  return TableResult{std::move(table), {}};
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string range_text(const IdRange& r) {
  return format_id_range(r.lo, r.hi) + " (" + r.server + ")";
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxServerNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// ---- JSON reading -------------------------------------------------------------------------------

// "" if the text is one well-formed JSON document without duplicate keys.
std::string check_syntax(std::string_view text, const json::parse_options& options) {
  const JsonCheck c = check_json(text, options);
  if (c.ok(text)) return {};
  const std::string at = json_position(text, c.used);
  if (!c.duplicate.empty()) {
    return "duplicate key " + json_quote(c.duplicate) + " at " + at +
           " (each key may appear once in an object)";
  }
  if (!c.error) return "invalid JSON at " + at + ": text after the end of the table";
  return "invalid JSON at " + at + ": " + c.error.message();
}

const char* kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "number";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "value";
}

bool read_u64(const json::value& v, const std::string& what, uint64_t& out, std::string& error) {
  if (v.is_uint64()) {
    out = v.get_uint64();
    return true;
  }
  if (v.is_int64()) {
    if (v.get_int64() < 0) {
      error = what + " must not be negative (got " + std::to_string(v.get_int64()) + ")";
      return false;
    }
    out = static_cast<uint64_t>(v.get_int64());
    return true;
  }
  if (v.is_double()) {
    error = what + " must be an integer between 0 and 18446744073709551615 (got " +
            json::serialize(v) + ")";
    return false;
  }
  error = what + " must be an integer, not a " + kind_name(v);
  return false;
}

bool read_u32(const json::value& v, const std::string& what, uint32_t& out, std::string& error) {
  uint64_t wide = 0;
  if (!read_u64(v, what, wide, error)) return false;
  if (wide > std::numeric_limits<uint32_t>::max()) {
    error = what + " is out of range (got " + std::to_string(wide) + ")";
    return false;
  }
  out = static_cast<uint32_t>(wide);
  return true;
}

bool read_string(const json::value& v, const std::string& what, std::string& out,
                 std::string& error) {
  if (!v.is_string()) {
    error = what + " must be a string, not a " + kind_name(v);
    return false;
  }
  out.assign(v.get_string().data(), v.get_string().size());
  return true;
}

// Rejects keys outside `allowed` and reports the first missing one of `required`.
bool check_keys(const json::object& object, const std::string& where,
                std::initializer_list<std::string_view> allowed,
                std::initializer_list<std::string_view> required, std::string& error) {
  for (const auto& entry : object) {
    std::string_view key(entry.key().data(), entry.key().size());
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string expected;
      for (std::string_view a : allowed)
        expected += (expected.empty() ? "" : ", ") + std::string(a);
      error = "unknown key " + json_quote(key) + " in " + where + " (expected " + expected + ")";
      return false;
    }
  }
  for (std::string_view key : required) {
    if (!object.contains(json::string_view(key.data(), key.size()))) {
      error = "missing key " + json_quote(key) + " in " + where;
      return false;
    }
  }
  return true;
}

const json::value* member(const json::object& object, std::string_view key) {
  return object.if_contains(json::string_view(key.data(), key.size()));
}

bool read_server(const json::value& v, const std::string& where, ServerInfo& out,
                 std::string& error) {
  const json::object* object = v.if_object();
  if (!object) {
    error = where + " must be an object, not a " + std::string(kind_name(v));
    return false;
  }
  if (!check_keys(*object, where, {"name", "address", "shards", "weight"}, {"name"}, error)) {
    return false;
  }
  if (!read_string(*member(*object, "name"), where + ".name", out.name, error)) return false;
  if (const json::value* a = member(*object, "address")) {
    if (!read_string(*a, where + ".address", out.address, error)) return false;
  }
  if (const json::value* s = member(*object, "shards")) {
    if (!read_u32(*s, where + ".shards", out.shards, error)) return false;
  }
  if (const json::value* w = member(*object, "weight")) {
    if (!read_u32(*w, where + ".weight", out.weight, error)) return false;
  }
  return true;
}

bool read_range(const json::value& v, const std::string& where, IdRange& out, std::string& error) {
  const json::object* object = v.if_object();
  if (!object) {
    error = where + " must be an object, not a " + std::string(kind_name(v));
    return false;
  }
  if (!check_keys(*object, where, {"lo", "hi", "server"}, {"lo", "hi", "server"}, error)) {
    return false;
  }
  return read_u64(*member(*object, "lo"), where + ".lo", out.lo, error) &&
         read_u64(*member(*object, "hi"), where + ".hi", out.hi, error) &&
         read_string(*member(*object, "server"), where + ".server", out.server, error);
}

TableResult table_from_value(const json::value& v) {
  const json::object* root = v.if_object();
  if (!root) return fail("the table must be a JSON object, not a " + std::string(kind_name(v)));
  std::string error;
  if (!check_keys(*root, "the table", {"version", "mode", "modulo_hash", "servers", "ranges"},
                  {"version", "mode", "servers"}, error)) {
    return fail(std::move(error));
  }
  Table table;
  if (!read_u64(*member(*root, "version"), "\"version\"", table.version, error)) {
    return fail(std::move(error));
  }

  std::string text;
  if (!read_string(*member(*root, "mode"), "\"mode\"", text, error)) return fail(std::move(error));
  std::optional<RoutingMode> mode = parse_mode(text);
  if (!mode)
    return fail("\"mode\" must be \"modulo\", \"range\" or \"ring\" (got " + json_quote(text) +
                ")");
  table.mode = *mode;

  if (const json::value* h = member(*root, "modulo_hash")) {
    if (!read_string(*h, "\"modulo_hash\"", text, error)) return fail(std::move(error));
    std::optional<ModuloHash> hash = parse_modulo_hash(text);
    if (!hash)
      return fail("\"modulo_hash\" must be \"mix\" or \"identity\" (got " + json_quote(text) + ")");
    table.modulo_hash = *hash;
  }

  const json::array* servers = member(*root, "servers")->if_array();
  if (!servers) {
    return fail("\"servers\" must be an array, not a " +
                std::string(kind_name(*member(*root, "servers"))));
  }
  if (servers->size() > kMaxServers) {
    return fail("the table has " + std::to_string(servers->size()) + " servers; at most " +
                std::to_string(kMaxServers) + " are allowed");
  }
  for (size_t i = 0; i < servers->size(); ++i) {
    ServerInfo server;
    if (!read_server((*servers)[i], "servers[" + std::to_string(i) + "]", server, error)) {
      return fail(std::move(error));
    }
    table.servers.push_back(std::move(server));
  }

  if (const json::value* r = member(*root, "ranges")) {
    const json::array* ranges = r->if_array();
    if (!ranges) return fail("\"ranges\" must be an array, not a " + std::string(kind_name(*r)));
    table.ranges.reserve(ranges->size());
    for (size_t i = 0; i < ranges->size(); ++i) {
      IdRange range;
      if (!read_range((*ranges)[i], "ranges[" + std::to_string(i) + "]", range, error)) {
        return fail(std::move(error));
      }
      table.ranges.push_back(std::move(range));
    }
  }
  return checked(std::move(table));
}

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

}  // namespace

// ---- Table --------------------------------------------------------------------------------------

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
    if (!valid_name(s.name)) {
      return where + " has the name " + json_quote(s.name) + "; a name is 1 to " +
             std::to_string(kMaxServerNameLength) + " characters of A-Z a-z 0-9 . _ -";
    }
    where += " (" + s.name + ")";
    for (size_t j = 0; j < i; ++j) {
      if (table.servers[j].name == s.name) {
        return "server name " + json_quote(s.name) + " appears twice (servers[" +
               std::to_string(j) + "] and servers[" + std::to_string(i) + "])";
      }
      if (!s.address.empty() && table.servers[j].address == s.address) {
        return "servers " + table.servers[j].name + " and " + s.name + " have the same address " +
               s.address;
      }
    }
    if (std::string problem = s.address.empty() ? "" : check_host_port(s.address);
        !problem.empty()) {
      return where + ": address " + json_quote(s.address) + " " + problem;
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
    return "ranges[" + std::to_string(i) + "] " + range_text(table.ranges[i]);
  };
  for (size_t i = 0; i < table.ranges.size(); ++i) {
    const IdRange& r = table.ranges[i];
    if (r.lo > r.hi) return where(i) + " ends before it starts";
    if (table.server_index(r.server) < 0) {
      return where(i) + " names the unknown server " + json_quote(r.server);
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

// ---- JSON ---------------------------------------------------------------------------------------

TableResult parse_table_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return fail("the table JSON is " + std::to_string(text.size()) + " bytes; at most " +
                std::to_string(kMaxJsonBytes) + " are allowed");
  }
  try {
    json::parse_options options;  // strict JSON, depth 32
    if (std::string error = check_syntax(text, options); !error.empty())
      return fail(std::move(error));
    json::error_code ec;
    json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, options);
    if (ec) return fail("invalid JSON: " + ec.message());
    return table_from_value(v);
  } catch (const std::exception& e) {  // allocation failure; nothing else throws here
    return fail(std::string("cannot parse the table: ") + e.what());
  }
}

std::string table_to_json(const Table& table) {
  std::string out = "{\n";
  out += "  \"version\": " + std::to_string(table.version) + ",\n";
  out += "  \"mode\": " + json_quote(to_string(table.mode)) + ",\n";
  out += "  \"modulo_hash\": " + json_quote(to_string(table.modulo_hash)) + ",\n";
  out += "  \"servers\": [";
  for (size_t i = 0; i < table.servers.size(); ++i) {
    const ServerInfo& s = table.servers[i];
    out += i == 0 ? "\n" : ",\n";
    out += "    {\"name\": " + json_quote(s.name) + ", \"address\": " + json_quote(s.address) +
           ", \"shards\": " + std::to_string(s.shards) +
           ", \"weight\": " + std::to_string(s.weight) + "}";
  }
  out += table.servers.empty() ? "]" : "\n  ]";
  if (!table.ranges.empty()) {
    out += ",\n  \"ranges\": [";
    for (size_t i = 0; i < table.ranges.size(); ++i) {
      const IdRange& r = table.ranges[i];
      out += i == 0 ? "\n" : ",\n";
      out += "    {\"lo\": " + std::to_string(r.lo) + ", \"hi\": " + std::to_string(r.hi) +
             ", \"server\": " + json_quote(r.server) + "}";
    }
    out += "\n  ]";
  }
  out += "\n}\n";
  return out;
}

TableResult load_table_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return fail("cannot read the table file " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open the table file " + path + ": " + std::strerror(errno));
  std::string text;
  try {
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) return fail("cannot read the table file " + path);
    text = std::move(buffer).str();
  } catch (const std::exception& e) {
    return fail("cannot read the table file " + path + ": " + e.what());
  }
  TableResult result = parse_table_json(text);
  if (!result.ok()) result.error = "table file " + path + ": " + result.error;
  return result;
}

// ---- Edits --------------------------------------------------------------------------------------

TableResult assign_range(const Table& table, uint64_t lo, uint64_t hi, std::string_view server) {
  if (std::string error = need_range_table(table, "assign"); !error.empty()) return fail(error);
  if (lo > hi)
    return fail("cannot assign " + format_id_range(lo, hi) + ": it ends before it starts");
  if (table.server_index(server) < 0) {
    return fail("cannot assign " + format_id_range(lo, hi) + ": there is no server named " +
                json_quote(server));
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
  return checked(std::move(out));
}

TableResult split_range(const Table& table, uint64_t at) {
  if (std::string error = need_range_table(table, "split"); !error.empty()) return fail(error);
  size_t i = range_index(table.ranges, at);
  const IdRange& r = table.ranges[i];
  if (r.lo == at) {
    return fail("cannot split at " + std::to_string(at) + ": ranges[" + std::to_string(i) + "] " +
                range_text(r) + " already starts there");
  }
  Table out = table;
  out.ranges[i].hi = at - 1;
  out.ranges.insert(out.ranges.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                    IdRange{at, r.hi, r.server});
  return checked(std::move(out));
}

TableResult merge_ranges(const Table& table, uint64_t lo, uint64_t hi) {
  if (std::string error = need_range_table(table, "merge"); !error.empty()) return fail(error);
  std::string what = "cannot merge " + format_id_range(lo, hi);
  if (lo > hi) return fail(what + ": it ends before it starts");
  size_t first = table.ranges.size(), last = 0;
  for (size_t i = 0; i < table.ranges.size(); ++i) {
    if (table.ranges[i].lo >= lo && table.ranges[i].hi <= hi) {
      first = std::min(first, i);
      last = i;
    }
  }
  if (first == table.ranges.size() || first == last) {
    return fail(what + ": fewer than two ranges lie wholly inside it");
  }
  for (size_t i = first + 1; i <= last; ++i) {
    if (table.ranges[i].server != table.ranges[first].server) {
      return fail(what + ": ranges[" + std::to_string(first) + "] " +
                  range_text(table.ranges[first]) + " and ranges[" + std::to_string(i) + "] " +
                  range_text(table.ranges[i]) +
                  " belong to different servers; assign the whole range to one server instead");
    }
  }
  Table out = table;
  out.ranges[first].hi = table.ranges[last].hi;
  out.ranges.erase(out.ranges.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                   out.ranges.begin() + static_cast<std::ptrdiff_t>(last) + 1);
  return checked(std::move(out));
}

TableResult set_mode(const Table& table, RoutingMode mode) {
  Table out = table;
  out.mode = mode;
  if (mode != RoutingMode::kRange) {
    out.ranges.clear();
  } else if (out.ranges.empty()) {
    out.ranges = even_ranges(out.servers);
  }
  TableResult result = checked(std::move(out));
  if (!result.ok())
    result.error = std::string("cannot switch to ") + to_string(mode) + " mode: " + result.error;
  return result;
}

TableResult add_server(const Table& table, ServerInfo server) {
  if (table.find_server(server.name)) {
    return fail("cannot add server " + json_quote(server.name) + ": a server of that name exists");
  }
  Table out = table;
  std::string name = server.name;
  out.servers.push_back(std::move(server));
  TableResult result = checked(std::move(out));
  if (!result.ok()) result.error = "cannot add server " + json_quote(name) + ": " + result.error;
  return result;
}

TableResult remove_server(const Table& table, std::string_view name) {
  std::string what = "cannot remove server " + json_quote(name);
  int index = table.server_index(name);
  if (index < 0) return fail(what + ": there is no server of that name");
  if (table.servers.size() == 1) return fail(what + ": it is the last one");
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
  TableResult result = checked(std::move(out));
  if (!result.ok()) result.error = what + ": " + result.error;
  return result;
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

// ---- Names --------------------------------------------------------------------------------------

const char* to_string(RoutingMode mode) {
  switch (mode) {
    case RoutingMode::kModulo:
      return "modulo";
    case RoutingMode::kRange:
      return "range";
    case RoutingMode::kRing:
      return "ring";
  }
  return "unknown";
}

std::optional<RoutingMode> parse_mode(std::string_view text) {
  if (text == "modulo") return RoutingMode::kModulo;
  if (text == "range") return RoutingMode::kRange;
  if (text == "ring") return RoutingMode::kRing;
  return std::nullopt;
}

const char* to_string(ModuloHash hash) {
  switch (hash) {
    case ModuloHash::kMix:
      return "mix";
    case ModuloHash::kIdentity:
      return "identity";
  }
  return "unknown";
}

std::optional<ModuloHash> parse_modulo_hash(std::string_view text) {
  if (text == "mix") return ModuloHash::kMix;
  if (text == "identity") return ModuloHash::kIdentity;
  return std::nullopt;
}

std::optional<std::pair<uint64_t, uint64_t>> parse_id_range(std::string_view text) {
  auto number = [](std::string_view s) -> std::optional<uint64_t> {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return value;
  };
  size_t dash = text.find('-');
  std::optional<uint64_t> lo = number(text.substr(0, dash));
  std::optional<uint64_t> hi = dash == std::string_view::npos ? lo : number(text.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return std::pair{*lo, *hi};
}

std::string format_id_range(uint64_t lo, uint64_t hi) {
  return std::to_string(lo) + "-" + std::to_string(hi);
}

bool is_valid_server_name(std::string_view name) { return valid_name(name); }

}  // namespace imhash
