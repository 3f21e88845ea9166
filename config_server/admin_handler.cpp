#include "config_server/admin_handler.h"

#include <algorithm>
#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>
#include <charconv>
#include <exception>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "common/endpoint.h"
#include "common/json_check.h"
#include "common/table_text.h"

namespace imhash {

namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

using http::verb;

AdminResult bad_request(const std::string& sentence) { return AdminResult::error(400, sentence); }

// ---- Routes -------------------------------------------------------------------------------------

enum class Endpoint {
  kHealth,
  kStatus,
  kTable,
  kHistory,
  kServers,  // GET lists, POST adds
  kServersRemove,
  kWhere,  // /v1/where/ID
  kMode,
  kAssign,
  kSplit,
  kMerge,
  kPurge,  // GET reports, POST starts or cancels
};

struct Route {
  std::string_view path;
  Endpoint endpoint;
  bool get;
  bool post;
};

constexpr Route kRoutes[] = {
    {"/healthz", Endpoint::kHealth, true, false},
    {"/v1/status", Endpoint::kStatus, true, false},
    {"/v1/table", Endpoint::kTable, true, false},
    {"/v1/history", Endpoint::kHistory, true, false},
    {"/v1/servers", Endpoint::kServers, true, true},
    {"/v1/servers/remove", Endpoint::kServersRemove, false, true},
    {"/v1/where/", Endpoint::kWhere, true, false},  // a prefix: the id follows
    {"/v1/mode", Endpoint::kMode, false, true},
    {"/v1/assign", Endpoint::kAssign, false, true},
    {"/v1/split", Endpoint::kSplit, false, true},
    {"/v1/merge", Endpoint::kMerge, false, true},
    {"/v1/purge", Endpoint::kPurge, true, true},
};
constexpr std::string_view kWherePrefix = "/v1/where/";

const Route* find_route(std::string_view path) {
  for (const Route& route : kRoutes) {
    if (route.endpoint == Endpoint::kWhere) {
      // The id is one path segment: /v1/where/5/x is no endpoint.
      if (path.starts_with(kWherePrefix) &&
          path.find('/', kWherePrefix.size()) == std::string_view::npos) {
        return &route;
      }
    } else if (path == route.path) {
      return &route;
    }
  }
  return nullptr;
}

std::string_view allowed(const Route& route) {
  if (route.get && route.post) return "GET, POST";
  return route.get ? "GET" : "POST";
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// ---- Query string -------------------------------------------------------------------------------

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes a query key or value ('+' is a space, as HTML forms write it).
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] != '%') {
      out += in[i];
    } else {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return true;
}

using Query = std::vector<std::pair<std::string, std::string>>;

// Parses "a=1&b=2" and checks every key against `keys`; "" or the error sentence.
std::string parse_query(std::string_view query, std::string_view endpoint,
                        std::initializer_list<std::string_view> keys, Query& out) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    std::string key, value;
    if (!percent_decode(part.substr(0, eq), key) ||
        (eq != std::string_view::npos && !percent_decode(part.substr(eq + 1), value))) {
      return "bad percent-escape in the query parameter " + quoted(part);
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string takes;
      for (std::string_view k : keys) takes += (takes.empty() ? "" : ", ") + std::string(k);
      return "unknown query parameter " + quoted(key) + " for " + std::string(endpoint) +
             (takes.empty() ? " (it takes none)" : " (it takes: " + takes + ")");
    }
    for (const auto& [k, v] : out) {
      if (k == key) return "query parameter " + quoted(key) + " is given twice";
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return {};
}

// ---- JSON body ----------------------------------------------------------------------------------

const char* a_kind(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

// The body as one JSON object; "" or the error sentence.
std::string parse_object(std::string_view body, json::object& out) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return "the request body is empty; this endpoint takes a JSON object";
  }
  json::parse_options options;  // strict JSON, depth 32
  const JsonCheck c = check_json(body, options);
  if (!c.duplicate.empty()) {
    return "duplicate field " + quoted(c.duplicate) + " at " + json_position(body, c.used) +
           " in the request body";
  }
  if (c.error) return "invalid JSON at " + json_position(body, c.used) + ": " + c.error.message();
  if (c.used != body.size()) {
    return "invalid JSON at " + json_position(body, c.used) + ": text after the end of the object";
  }
  json::error_code ec;
  json::value v = json::parse(json::string_view(body.data(), body.size()), ec, {}, options);
  if (ec) return "invalid JSON: " + ec.message();
  if (!v.is_object()) {
    return std::string("the request body must be a JSON object, not ") + a_kind(v);
  }
  out = std::move(v.get_object());
  return {};
}

// ---- Fields -------------------------------------------------------------------------------------

// How an error names a field: "lo" at the top level, "servers[2].name" inside an array.
std::string label(const std::string& where, std::string_view key) {
  return "\"" + (where.empty() ? std::string(key) : where + "." + std::string(key)) + "\"";
}

std::string only_fields(const json::object& object, const std::string& where,
                        std::initializer_list<std::string_view> known) {
  for (const auto& entry : object) {
    const std::string_view key(entry.key().data(), entry.key().size());
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string expected;
      for (std::string_view k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
      return "unknown field " + quoted(key) + (where.empty() ? "" : " in \"" + where + "\"") +
             " (expected " + expected + ")";
    }
  }
  return {};
}

const json::value* member(const json::object& object, std::string_view key) {
  return object.if_contains(json::string_view(key.data(), key.size()));
}

// Reads an id: a JSON integer 0..2^64-1, or a decimal string (for clients whose JSON numbers are
// doubles and would round ids above 2^53).
std::string read_id(const json::object& object, const std::string& where, std::string_view key,
                    uint64_t& out) {
  const json::value* v = member(object, key);
  const std::string name = label(where, key);
  if (!v) return "missing field " + name;
  if (v->is_uint64()) {
    out = v->get_uint64();
    return {};
  }
  if (v->is_int64()) {
    if (v->get_int64() < 0) {
      return name + " must not be negative (got " + std::to_string(v->get_int64()) + ")";
    }
    out = static_cast<uint64_t>(v->get_int64());
    return {};
  }
  if (v->is_double()) {
    return name + " must be an integer between 0 and 18446744073709551615 (got " +
           json::serialize(*v) + ")";
  }
  if (v->is_string()) {
    const std::string_view text(v->get_string().data(), v->get_string().size());
    if (auto id = parse_decimal_id(text)) {
      out = *id;
      return {};
    }
    return name + " must be a decimal id between 0 and 18446744073709551615 (got " + quoted(text) +
           ")";
  }
  return name + " must be an id (an integer or a decimal string), not " + a_kind(*v);
}

// Reads an optional integer in [min, max]; `present` tells whether it was there.
std::string read_count(const json::object& object, const std::string& where, std::string_view key,
                       uint64_t min, uint64_t max, uint32_t& out, bool* present = nullptr) {
  const json::value* v = member(object, key);
  if (present) *present = v != nullptr;
  if (!v) return {};
  const std::string name = label(where, key);
  const std::string range =
      " must be an integer between " + std::to_string(min) + " and " + std::to_string(max);
  if (v->is_int64() || v->is_uint64() || v->is_double()) {
    const bool fits =
        (v->is_uint64() && v->get_uint64() >= min && v->get_uint64() <= max) ||
        (v->is_int64() && v->get_int64() >= 0 && static_cast<uint64_t>(v->get_int64()) >= min &&
         static_cast<uint64_t>(v->get_int64()) <= max);
    if (!fits) return name + range + " (got " + json::serialize(*v) + ")";
    out = static_cast<uint32_t>(v->is_uint64() ? v->get_uint64()
                                               : static_cast<uint64_t>(v->get_int64()));
    return {};
  }
  return name + range + ", not " + a_kind(*v);
}

// Reads a string field; `required` makes a missing one an error.
std::string read_string(const json::object& object, const std::string& where, std::string_view key,
                        bool required, std::optional<std::string>& out) {
  const json::value* v = member(object, key);
  if (!v) return required ? "missing field " + label(where, key) : std::string{};
  if (!v->is_string()) return label(where, key) + " must be a string, not " + a_kind(*v);
  out.emplace(v->get_string().data(), v->get_string().size());
  return {};
}

std::string check_name(const std::string& field, const std::string& name) {
  if (is_valid_server_name(name)) return {};
  return field + " " + quoted(name) + " is not a valid server name (1 to " +
         std::to_string(kMaxServerNameLength) + " characters of A-Z a-z 0-9 . _ -)";
}

// "" if `address` is HOST:PORT with a port in 1..65535 (what a routing table accepts).
std::string check_address(const std::string& field, std::string_view address) {
  if (address.empty()) return field + " must not be empty (leave it out to use the node's own)";
  const std::string problem = check_host_port(address);
  if (problem.empty()) return {};
  return field + " " + quoted(address) + " " + problem;
}

// Reads a non-empty array of at most kMaxServers entries.
std::string read_list(const json::object& object, std::string_view key, const json::array*& out) {
  const json::value* v = member(object, key);
  if (!v) return "missing field " + label({}, key);
  out = v->if_array();
  if (!out) return label({}, key) + " must be an array, not " + a_kind(*v);
  if (out->empty()) return label({}, key) + " must not be empty";
  if (out->size() > kMaxServers) {
    return label({}, key) + " has " + std::to_string(out->size()) + " entries; at most " +
           std::to_string(kMaxServers) + " are allowed";
  }
  return {};
}

// ---- Endpoints ----------------------------------------------------------------------------------

AdminResult history(AdminBackend& backend, std::string_view query) {
  Query params;
  if (std::string e = parse_query(query, "GET /v1/history", {"limit"}, params); !e.empty()) {
    return bad_request(e);
  }
  uint64_t limit = kAdminDefaultHistoryLimit;
  if (!params.empty()) {
    const auto n = parse_decimal_id(params.front().second);
    if (!n || *n < 1 || *n > kAdminMaxHistoryLimit) {
      return bad_request("\"limit\" must be an integer between 1 and " +
                         std::to_string(kAdminMaxHistoryLimit) + " (got " +
                         quoted(params.front().second) + ")");
    }
    limit = *n;
  }
  return backend.history(limit);
}

AdminResult where(AdminBackend& backend, std::string_view path) {
  const std::string_view text = path.substr(kWherePrefix.size());
  if (text.empty()) return bad_request("missing id: use GET /v1/where/ID");
  const auto id = parse_decimal_id(text);
  if (!id) {
    return bad_request(quoted(text) +
                       " is not an id: expected a decimal integer between 0 and "
                       "18446744073709551615");
  }
  return backend.where(*id);
}

AdminResult set_mode(AdminBackend& backend, const json::object& body) {
  std::optional<std::string> mode_text, hash_text;
  std::string e = only_fields(body, {}, {"mode", "modulo_hash"});
  if (e.empty()) e = read_string(body, {}, "mode", true, mode_text);
  if (e.empty()) e = read_string(body, {}, "modulo_hash", false, hash_text);
  if (!e.empty()) return bad_request(e);
  const auto mode = parse_mode(*mode_text);
  if (!mode) {
    return bad_request("unknown mode " + quoted(*mode_text) +
                       " (expected \"modulo\", \"range\" or \"ring\")");
  }
  std::optional<ModuloHash> hash;
  if (hash_text) {
    hash = parse_modulo_hash(*hash_text);
    if (!hash) {
      return bad_request("unknown modulo_hash " + quoted(*hash_text) +
                         " (expected \"mix\" or \"identity\")");
    }
    if (*mode != RoutingMode::kModulo) {
      return bad_request("\"modulo_hash\" applies to mode \"modulo\" only, not " +
                         quoted(*mode_text));
    }
  }
  return backend.set_mode(*mode, hash);
}

AdminResult add_servers(AdminBackend& backend, const json::object& body) {
  const json::array* list = nullptr;
  std::string e = only_fields(body, {}, {"servers"});
  if (e.empty()) e = read_list(body, "servers", list);
  if (!e.empty()) return bad_request(e);
  std::vector<ServerSpec> specs;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string where = "servers[" + std::to_string(i) + "]";
    const json::object* object = (*list)[i].if_object();
    if (!object) {
      return bad_request("\"" + where + "\" must be an object, not " + a_kind((*list)[i]));
    }
    ServerSpec spec;
    std::optional<std::string> name;
    uint32_t shards = 0;
    bool has_shards = false;
    e = only_fields(*object, where, {"name", "address", "shards", "weight"});
    if (e.empty()) e = read_string(*object, where, "name", true, name);
    if (e.empty()) e = check_name(label(where, "name"), *name);
    if (e.empty()) e = read_string(*object, where, "address", false, spec.address);
    if (e.empty() && spec.address) e = check_address(label(where, "address"), *spec.address);
    if (e.empty()) e = read_count(*object, where, "shards", 1, kMaxShards, shards, &has_shards);
    if (e.empty()) e = read_count(*object, where, "weight", 1, kMaxWeight, spec.weight);
    if (!e.empty()) return bad_request(e);
    for (const ServerSpec& earlier : specs) {
      if (earlier.name == *name) {
        return bad_request(label(where, "name") + ": " + quoted(*name) + " is listed twice");
      }
    }
    spec.name = std::move(*name);
    if (has_shards) spec.shards = shards;
    specs.push_back(std::move(spec));
  }
  return backend.add_servers(specs);
}

AdminResult remove_servers(AdminBackend& backend, const json::object& body) {
  const json::array* list = nullptr;
  std::string e = only_fields(body, {}, {"names"});
  if (e.empty()) e = read_list(body, "names", list);
  if (!e.empty()) return bad_request(e);
  std::vector<std::string> names;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string field = "\"names[" + std::to_string(i) + "]\"";
    const json::string* name = (*list)[i].if_string();
    if (!name) return bad_request(field + " must be a string, not " + a_kind((*list)[i]));
    std::string text(name->data(), name->size());
    if (e = check_name(field, text); !e.empty()) return bad_request(e);
    if (std::find(names.begin(), names.end(), text) != names.end()) {
      return bad_request(field + ": " + quoted(text) + " is listed twice");
    }
    names.push_back(std::move(text));
  }
  return backend.remove_servers(names);
}

// Reads "lo" and "hi" and checks lo <= hi.
std::string read_range(const json::object& body, uint64_t& lo, uint64_t& hi) {
  std::string e = read_id(body, {}, "lo", lo);
  if (e.empty()) e = read_id(body, {}, "hi", hi);
  if (e.empty() && lo > hi) e = "range " + format_id_range(lo, hi) + ": lo is greater than hi";
  return e;
}

AdminResult assign(AdminBackend& backend, const json::object& body) {
  uint64_t lo = 0, hi = 0;
  std::optional<std::string> server;
  std::string e = only_fields(body, {}, {"lo", "hi", "server"});
  if (e.empty()) e = read_range(body, lo, hi);
  if (e.empty()) e = read_string(body, {}, "server", true, server);
  if (e.empty()) e = check_name("\"server\"", *server);
  if (!e.empty()) return bad_request(e);
  return backend.assign(lo, hi, *server);
}

AdminResult split(AdminBackend& backend, const json::object& body) {
  uint64_t at = 0;
  std::string e = only_fields(body, {}, {"at"});
  if (e.empty()) e = read_id(body, {}, "at", at);
  if (!e.empty()) return bad_request(e);
  return backend.split(at);
}

AdminResult merge(AdminBackend& backend, const json::object& body) {
  uint64_t lo = 0, hi = 0;
  std::string e = only_fields(body, {}, {"lo", "hi"});
  if (e.empty()) e = read_range(body, lo, hi);
  if (!e.empty()) return bad_request(e);
  return backend.merge(lo, hi);
}

AdminResult purge(AdminBackend& backend, const json::object& body) {
  std::optional<std::string> server, kind_text;
  uint32_t age = 0;
  bool has_age = false;
  std::string e = only_fields(body, {}, {"server", "kind", "age_s"});
  if (e.empty()) e = read_string(body, {}, "server", true, server);
  if (e.empty()) e = check_name("\"server\"", *server);
  if (e.empty()) e = read_string(body, {}, "kind", true, kind_text);
  if (e.empty()) {
    e = read_count(body, {}, "age_s", 1, std::numeric_limits<uint32_t>::max(), age, &has_age);
  }
  if (!e.empty()) return bad_request(e);
  frame::PurgeAction kind;
  if (*kind_text == "not_owned") {
    kind = frame::PurgeAction::kNotOwned;
  } else if (*kind_text == "older_than") {
    kind = frame::PurgeAction::kOlderThan;
  } else if (*kind_text == "all") {
    kind = frame::PurgeAction::kAll;
  } else if (*kind_text == "cancel") {
    kind = frame::PurgeAction::kCancel;
  } else {
    return bad_request("unknown purge kind " + quoted(*kind_text) +
                       " (expected \"not_owned\", \"older_than\", \"all\" or \"cancel\")");
  }
  if (kind == frame::PurgeAction::kOlderThan && !has_age) {
    return bad_request("missing field \"age_s\" (kind \"older_than\" needs it)");
  }
  if (kind != frame::PurgeAction::kOlderThan && has_age) {
    return bad_request("\"age_s\" applies to kind \"older_than\" only, not " + quoted(*kind_text));
  }
  return backend.purge(*server, kind, age);
}

AdminResult dispatch(AdminBackend& backend, const Route& route, verb method,
                     std::string_view target, std::string_view body) {
  const std::string_view path = path_of(target);
  const std::string_view query =
      path.size() < target.size() ? target.substr(path.size() + 1) : std::string_view{};
  const std::string endpoint = std::string(http::to_string(method)) + " " + std::string(route.path);

  if (route.endpoint == Endpoint::kHistory) return history(backend, query);
  Query none;
  if (std::string e =
          parse_query(query,
                      route.endpoint == Endpoint::kWhere ? std::string_view("GET /v1/where/ID")
                                                         : std::string_view(endpoint),
                      {}, none);
      !e.empty()) {
    return bad_request(e);
  }
  if (method == verb::get) {
    switch (route.endpoint) {
      case Endpoint::kHealth:
        return AdminResult::ok(json::object{{"ok", true}});
      case Endpoint::kStatus:
        return backend.status();
      case Endpoint::kTable:
        return backend.table();
      case Endpoint::kServers:
        return backend.servers();
      case Endpoint::kWhere:
        return where(backend, path);
      case Endpoint::kPurge:
        return backend.purge_status();
      default:
        break;
    }
    return AdminResult::error(500, "internal error: no GET handler for " + std::string(route.path));
  }

  json::object object;
  if (std::string e = parse_object(body, object); !e.empty()) return bad_request(e);
  switch (route.endpoint) {
    case Endpoint::kServers:
      return add_servers(backend, object);
    case Endpoint::kServersRemove:
      return remove_servers(backend, object);
    case Endpoint::kMode:
      return set_mode(backend, object);
    case Endpoint::kAssign:
      return assign(backend, object);
    case Endpoint::kSplit:
      return split(backend, object);
    case Endpoint::kMerge:
      return merge(backend, object);
    case Endpoint::kPurge:
      return purge(backend, object);
    default:
      break;
  }
  return AdminResult::error(500, "internal error: no POST handler for " + std::string(route.path));
}

}  // namespace

std::string_view admin_allowed_methods(std::string_view target) {
  const Route* route = find_route(path_of(target));
  return route ? allowed(*route) : std::string_view{};
}

AdminResult handle_admin_request(AdminBackend& backend, verb method, std::string_view target,
                                 std::string_view body) {
  try {
    const std::string_view path = path_of(target);
    const Route* route = find_route(path);
    if (!route) return AdminResult::error(404, "no such endpoint: " + printable(path));
    if ((method == verb::get && !route->get) || (method == verb::post && !route->post) ||
        (method != verb::get && method != verb::post)) {
      const std::string name =
          method == verb::unknown ? std::string("(unknown)") : std::string(http::to_string(method));
      return AdminResult::error(405, "method " + name + " is not allowed on " + printable(path) +
                                         " (allowed: " + std::string(allowed(*route)) + ")");
    }
    if (body.size() > kAdminMaxBodyBytes) {
      return AdminResult::error(413, "the request body is " + std::to_string(body.size()) +
                                         " bytes; at most " + std::to_string(kAdminMaxBodyBytes) +
                                         " are allowed");
    }
    return dispatch(backend, *route, method, target, body);
  } catch (const std::exception& e) {  // allocation failure, or a backend that throws
    return AdminResult::error(500, "internal error: " + printable(e.what(), 200));
  }
}

}  // namespace imhash
