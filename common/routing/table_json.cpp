#include "common/routing/table_json.h"

#include <boost/json/value.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/codec/json_check.h"
#include "common/routing/json_fields.h"
#include "common/routing/table_text.h"

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

bool read_server(JsonValue value, ServerInfo& out) {
  JsonObject o = value.object(UnknownKeys::kReject);
  o.need("name").string(out.name);
  o.get("address").string(out.address);
  o.get("shards").integer(out.shards);
  o.get("weight").integer(out.weight);
  return o.finish();
}

bool read_range(JsonValue value, IdRange& out) {
  JsonObject o = value.object(UnknownKeys::kReject);
  o.need("lo").integer(out.lo);
  o.need("hi").integer(out.hi);
  o.need("server").string(out.server);
  return o.finish();
}

}  // namespace

bool read_table(JsonObject& o, Table& out) {
  o.need("version").integer(out.version);
  o.need("mode").choice(out.mode, kRoutingModes, to_string);
  o.get("modulo_hash").choice(out.modulo_hash, kModuloHashes, to_string);
  o.get("replicas").integer(out.replicas);
  JsonArray servers =
      o.need("servers").array(std::numeric_limits<size_t>::max());  // validate() bounds it
  out.servers.resize(servers.size());
  for (size_t i = 0; i < servers.size() && o.ok(); ++i) read_server(servers[i], out.servers[i]);
  JsonArray ranges = o.get("ranges").array(std::numeric_limits<size_t>::max());
  out.ranges.resize(ranges.size());
  for (size_t i = 0; i < ranges.size() && o.ok(); ++i) read_range(ranges[i], out.ranges[i]);
  return o.finish();
}

TableResult parse_table_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return TableResult::failure("the table JSON is " + std::to_string(text.size()) +
                                " bytes; at most " + std::to_string(kMaxJsonBytes) +
                                " are allowed");
  }
  try {
    std::string error;
    const std::optional<json::value> doc = parse_strict_json(text, error);
    if (!doc) return TableResult::failure(std::move(error));
    JsonObject root = JsonObject::root(*doc, "the table", UnknownKeys::kReject, error);
    Table table;
    if (!read_table(root, table)) return TableResult::failure(std::move(error));
    return TableResult::checked(std::move(table));
  } catch (const std::exception& e) {  // allocation failure; nothing else throws here
    return TableResult::failure(std::string("cannot parse the table: ") + e.what());
  }
}

std::string table_to_json(const Table& table) {
  std::string out = "{\n";
  out += "  \"version\": " + std::to_string(table.version) + ",\n";
  out += "  \"mode\": " + json_quote(to_string(table.mode)) + ",\n";
  out += "  \"modulo_hash\": " + json_quote(to_string(table.modulo_hash)) + ",\n";
  // Written only when there are replicas, so a table without them reads as it always did (also
  // to a node that predates them).
  if (table.replicas != 1) out += "  \"replicas\": " + std::to_string(table.replicas) + ",\n";
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
