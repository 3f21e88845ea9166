#include "common/table_json.h"

#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "common/json_check.h"
#include "common/table_text.h"

namespace imhash {

namespace json = boost::json;

namespace {

constexpr size_t kMaxJsonBytes = 16 << 20;

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
  if (!root)
    return TableResult::failure("the table must be a JSON object, not a " +
                                std::string(kind_name(v)));
  std::string error;
  if (!check_keys(*root, "the table", {"version", "mode", "modulo_hash", "servers", "ranges"},
                  {"version", "mode", "servers"}, error)) {
    return TableResult::failure(std::move(error));
  }
  Table table;
  if (!read_u64(*member(*root, "version"), "\"version\"", table.version, error)) {
    return TableResult::failure(std::move(error));
  }

  std::string text;
  if (!read_string(*member(*root, "mode"), "\"mode\"", text, error))
    return TableResult::failure(std::move(error));
  std::optional<RoutingMode> mode = parse_mode(text);
  if (!mode)
    return TableResult::failure("\"mode\" must be \"modulo\", \"range\" or \"ring\" (got " +
                                json_quote(text) + ")");
  table.mode = *mode;

  if (const json::value* h = member(*root, "modulo_hash")) {
    if (!read_string(*h, "\"modulo_hash\"", text, error))
      return TableResult::failure(std::move(error));
    std::optional<ModuloHash> hash = parse_modulo_hash(text);
    if (!hash)
      return TableResult::failure("\"modulo_hash\" must be \"mix\" or \"identity\" (got " +
                                  json_quote(text) + ")");
    table.modulo_hash = *hash;
  }

  const json::array* servers = member(*root, "servers")->if_array();
  if (!servers) {
    return TableResult::failure("\"servers\" must be an array, not a " +
                                std::string(kind_name(*member(*root, "servers"))));
  }
  if (servers->size() > kMaxServers) {
    return TableResult::failure("the table has " + std::to_string(servers->size()) +
                                " servers; at most " + std::to_string(kMaxServers) +
                                " are allowed");
  }
  for (size_t i = 0; i < servers->size(); ++i) {
    ServerInfo server;
    if (!read_server((*servers)[i], "servers[" + std::to_string(i) + "]", server, error)) {
      return TableResult::failure(std::move(error));
    }
    table.servers.push_back(std::move(server));
  }

  if (const json::value* r = member(*root, "ranges")) {
    const json::array* ranges = r->if_array();
    if (!ranges)
      return TableResult::failure("\"ranges\" must be an array, not a " +
                                  std::string(kind_name(*r)));
    table.ranges.reserve(ranges->size());
    for (size_t i = 0; i < ranges->size(); ++i) {
      IdRange range;
      if (!read_range((*ranges)[i], "ranges[" + std::to_string(i) + "]", range, error)) {
        return TableResult::failure(std::move(error));
      }
      table.ranges.push_back(std::move(range));
    }
  }
  return TableResult::checked(std::move(table));
}

}  // namespace

TableResult parse_table_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return TableResult::failure("the table JSON is " + std::to_string(text.size()) +
                                " bytes; at most " + std::to_string(kMaxJsonBytes) +
                                " are allowed");
  }
  try {
    json::parse_options options;  // strict JSON, depth 32
    if (std::string error = check_syntax(text, options); !error.empty())
      return TableResult::failure(std::move(error));
    json::error_code ec;
    json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, options);
    if (ec) return TableResult::failure("invalid JSON: " + ec.message());
    return table_from_value(v);
  } catch (const std::exception& e) {  // allocation failure; nothing else throws here
    return TableResult::failure(std::string("cannot parse the table: ") + e.what());
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
    return TableResult::failure("cannot read the table file " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return TableResult::failure("cannot open the table file " + path + ": " + std::strerror(errno));
  std::string text;
  try {
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) return TableResult::failure("cannot read the table file " + path);
    text = std::move(buffer).str();
  } catch (const std::exception& e) {
    return TableResult::failure("cannot read the table file " + path + ": " + e.what());
  }
  TableResult result = parse_table_json(text);
  if (!result.ok()) result.error = "table file " + path + ": " + result.error;
  return result;
}

}  // namespace imhash
