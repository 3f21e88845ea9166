#include "config_server/admin_handler.h"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <exception>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "common/codec/endpoint.h"
#include "common/codec/json_check.h"
#include "common/routing/control_protocol.h"
#include "common/routing/json_fields.h"
#include "common/routing/table_text.h"

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
  kServersSet,
  kWhere,  // /v1/where/ID
  kMode,
  kReplicas,
  kAssign,
  kSplit,
  kMerge,
  kPurge,  // GET reports, POST starts or cancels
  kDrain,  // /v1/servers/NAME/drain: GET shows, POST starts
  kStreams,
  kStreamCancel,   // /v1/streams/NAME/cancel
  kStreamRestart,  // /v1/streams/NAME/restart
};

// `path`, or with a `suffix` the pattern path + NAME + suffix (NAME one path segment).
struct Route {
  std::string_view path;
  Endpoint endpoint;
  bool get;
  bool post;
  std::string_view suffix = {};
  std::string_view shape = {};  // how errors name a patterned endpoint
};

constexpr Route kRoutes[] = {
    {"/healthz", Endpoint::kHealth, true, false},
    {"/v1/status", Endpoint::kStatus, true, false},
    {"/v1/table", Endpoint::kTable, true, false},
    {"/v1/history", Endpoint::kHistory, true, false},
    {"/v1/servers", Endpoint::kServers, true, true},
    {"/v1/servers/remove", Endpoint::kServersRemove, false, true},
    {"/v1/servers/set", Endpoint::kServersSet, false, true},
    {"/v1/where/", Endpoint::kWhere, true, false},  // a prefix: the id follows
    {"/v1/mode", Endpoint::kMode, false, true},
    {"/v1/replicas", Endpoint::kReplicas, false, true},
    {"/v1/assign", Endpoint::kAssign, false, true},
    {"/v1/split", Endpoint::kSplit, false, true},
    {"/v1/merge", Endpoint::kMerge, false, true},
    {"/v1/purge", Endpoint::kPurge, true, true},
    {"/v1/servers/", Endpoint::kDrain, true, true, "/drain", "/v1/servers/NAME/drain"},
    {"/v1/streams", Endpoint::kStreams, true, false},
    {"/v1/streams/", Endpoint::kStreamCancel, false, true, "/cancel", "/v1/streams/NAME/cancel"},
    {"/v1/streams/", Endpoint::kStreamRestart, false, true, "/restart", "/v1/streams/NAME/restart"},
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
    } else if (!route.suffix.empty()) {
      if (path.size() > route.path.size() + route.suffix.size() && path.starts_with(route.path) &&
          path.ends_with(route.suffix)) {
        const std::string_view name =
            path.substr(route.path.size(), path.size() - route.path.size() - route.suffix.size());
        if (name.find('/') == std::string_view::npos) return &route;
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
      return "bad percent-escape in the query parameter " + quoted_value(part);
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string takes;
      for (std::string_view k : keys) takes += (takes.empty() ? "" : ", ") + std::string(k);
      return "unknown query parameter " + quoted_value(key) + " for " + std::string(endpoint) +
             (takes.empty() ? " (it takes none)" : " (it takes: " + takes + ")");
    }
    for (const auto& [k, v] : out) {
      if (k == key) return "query parameter " + quoted_value(key) + " is given twice";
    }
    out.emplace_back(std::move(key), std::move(value));
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
                         quoted_value(params.front().second) + ")");
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
    return bad_request(quoted_value(text) +
                       " is not an id: expected a decimal integer between 0 and "
                       "18446744073709551615");
  }
  return backend.where(*id);
}

// ---- JSON body ----------------------------------------------------------------------------------
//
// Bodies are read with the shared strict reader (common/routing/json_fields.h): unknown keys are
// rejected, so a typo is loud, and every error names the member by its path ("servers[2].name").

// The body as one strict JSON document; "" or the error sentence.
std::string parse_body(std::string_view body, std::optional<json::value>& out) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return "the request body is empty; this endpoint takes a JSON object";
  }
  std::string error;
  out = parse_strict_json(body, error);
  return error;
}

// A server name: a string that obeys kServerNameRule.
bool read_name(JsonValue v, std::string& out) {
  if (!v.string(out)) return false;
  if (!v.present() || is_valid_server_name(out)) return true;
  return v.fail("must be a server name, " + std::string(kServerNameRule) + " (got " +
                quoted_value(out) + ")");
}

// An optional HOST:PORT, as a routing table takes it (check_host_port).
bool read_address(JsonValue v, std::optional<std::string>& out) {
  std::string text;
  if (!v.string(text)) return false;
  if (!v.present()) return true;
  if (text.empty()) return v.fail("must not be empty (leave it out to use the node's own)");
  if (std::string problem = check_host_port(text); !problem.empty()) {
    return v.fail(problem + " (got " + quoted_value(text) + ")");
  }
  if (is_unspecified_address(text)) {
    return v.fail("is an unspecified address, which login servers cannot dial (got " +
                  quoted_value(text) + "); give the address they reach the server at");
  }
  out = std::move(text);
  return true;
}

// "lo" and "hi", with lo <= hi.
bool read_range(JsonObject& body, uint64_t& lo, uint64_t& hi, std::string& error) {
  if (!body.need("lo").id(lo) || !body.need("hi").id(hi)) return false;
  if (lo > hi) error = "range " + format_id_range(lo, hi) + ": lo is greater than hi";
  return error.empty();
}

// A list of distinct server names (one request names each server once).
bool listed_once(JsonValue name_value, const std::string& name,
                 const std::vector<std::string>& earlier) {
  if (std::find(earlier.begin(), earlier.end(), name) == earlier.end()) return true;
  return name_value.fail("repeats " + quoted_value(name) + " (each server may be listed once)");
}

// ---- Endpoints with a body ----------------------------------------------------------------------
//
// Each reads its members, then finish() rejects the keys it did not ask for; `error` is the body
// reader's error, sent back as the 400 sentence.

AdminResult set_mode(AdminBackend& backend, JsonObject& body, std::string& error) {
  RoutingMode mode = RoutingMode::kModulo;
  ModuloHash hash = ModuloHash::kMix;
  body.need("mode").choice(mode, kRoutingModes, to_string);
  JsonValue hash_value = body.get("modulo_hash");
  hash_value.choice(hash, kModuloHashes, to_string);
  if (body.finish() && hash_value.present() && mode != RoutingMode::kModulo) {
    hash_value.fail("applies to mode \"modulo\" only, not " + quoted_value(to_string(mode)));
  }
  if (!error.empty()) return bad_request(error);
  return backend.set_mode(mode, hash_value.present() ? std::optional(hash) : std::nullopt);
}

AdminResult set_replicas(AdminBackend& backend, JsonObject& body, std::string& error) {
  uint32_t replicas = 1;
  body.need("replicas").integer(replicas, 1, kMaxReplicas);
  if (!body.finish()) return bad_request(error);
  return backend.set_replicas(replicas);
}

AdminResult add_servers(AdminBackend& backend, JsonObject& body, std::string& error) {
  JsonArray list = body.need("servers").array(kMaxServers, 1);
  std::vector<ServerSpec> specs(list.size());
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size() && error.empty(); ++i) {
    JsonObject server = list[i].object(UnknownKeys::kReject);
    ServerSpec& spec = specs[i];
    JsonValue name = server.need("name");
    if (read_name(name, spec.name) && listed_once(name, spec.name, names)) {
      names.push_back(spec.name);
    }
    read_address(server.get("address"), spec.address);
    JsonValue shards_value = server.get("shards");
    uint32_t shards = 0;
    if (shards_value.integer(shards, 1, kMaxShards) && shards_value.present()) spec.shards = shards;
    server.get("weight").integer(spec.weight, 1, kMaxWeight);
    server.finish();
  }
  if (!body.finish()) return bad_request(error);
  return backend.add_servers(specs);
}

AdminResult set_server(AdminBackend& backend, JsonObject& body, std::string& error) {
  std::string name;
  std::optional<std::string> address;
  std::optional<uint32_t> weight;
  read_name(body.need("name"), name);
  JsonValue address_value = body.get("address");
  read_address(address_value, address);
  JsonValue weight_value = body.get("weight");
  uint32_t w = 1;
  if (weight_value.integer(w, 1, kMaxWeight) && weight_value.present()) weight = w;
  if (body.finish() && !address_value.present() && !weight_value.present()) {
    error = "nothing to change: give \"address\", \"weight\" or both";
  }
  if (!error.empty()) return bad_request(error);
  return backend.set_server(name, address, weight);
}

AdminResult remove_servers(AdminBackend& backend, JsonObject& body, std::string& error) {
  JsonArray list = body.need("names").array(kMaxServers, 1);
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size() && error.empty(); ++i) {
    std::string name;
    if (read_name(list[i], name) && listed_once(list[i], name, names)) {
      names.push_back(std::move(name));
    }
  }
  if (!body.finish()) return bad_request(error);
  return backend.remove_servers(names);
}

AdminResult assign(AdminBackend& backend, JsonObject& body, std::string& error) {
  uint64_t lo = 0, hi = 0;
  std::string server;
  if (read_range(body, lo, hi, error)) read_name(body.need("server"), server);
  if (!body.finish()) return bad_request(error);
  return backend.assign(lo, hi, server);
}

AdminResult split(AdminBackend& backend, JsonObject& body, std::string& error) {
  uint64_t at = 0;
  body.need("at").id(at);
  if (!body.finish()) return bad_request(error);
  return backend.split(at);
}

AdminResult merge(AdminBackend& backend, JsonObject& body, std::string& error) {
  uint64_t lo = 0, hi = 0;
  read_range(body, lo, hi, error);
  if (!body.finish()) return bad_request(error);
  return backend.merge(lo, hi);
}

// The purge kinds the API starts (a status is GET /v1/purge).
constexpr std::array kPurgeKinds{frame::PurgeAction::kNotOwned, frame::PurgeAction::kOlderThan,
                                 frame::PurgeAction::kAll, frame::PurgeAction::kCancel};

AdminResult purge(AdminBackend& backend, JsonObject& body, std::string& error) {
  std::string server;
  frame::PurgeAction kind = frame::PurgeAction::kNotOwned;
  uint32_t age = 0;
  read_name(body.need("server"), server);
  body.need("kind").choice(kind, kPurgeKinds, control::purge_action_name);
  JsonValue age_value = body.get("age_s");
  age_value.integer(age, 1, std::numeric_limits<uint32_t>::max());
  if (body.finish()) {
    const bool older_than = kind == frame::PurgeAction::kOlderThan;
    if (older_than && !age_value.present()) {
      age_value.fail("is missing (kind \"older_than\" needs it)");
    } else if (!older_than && age_value.present()) {
      age_value.fail("applies to kind \"older_than\" only, not " +
                     quoted_value(control::purge_action_name(kind)));
    }
  }
  if (!error.empty()) return bad_request(error);
  return backend.purge(server, kind, age);
}

// The NAME of a patterned path (/v1/servers/NAME/drain); "" with `error` set if it is no server
// name.
std::string path_name(const Route& route, std::string_view path, std::string& error) {
  const std::string_view raw =
      path.substr(route.path.size(), path.size() - route.path.size() - route.suffix.size());
  std::string name;
  if (!percent_decode(raw, name) || !is_valid_server_name(name)) {
    error = quoted_value(raw) + " is not a server name, " + std::string(kServerNameRule);
    return {};
  }
  return name;
}

AdminResult dispatch(AdminBackend& backend, const Route& route, verb method,
                     std::string_view target, std::string_view body) {
  const std::string_view path = path_of(target);
  const std::string_view query =
      path.size() < target.size() ? target.substr(path.size() + 1) : std::string_view{};
  const std::string endpoint = std::string(http::to_string(method)) + " " +
                               std::string(route.shape.empty() ? route.path : route.shape);

  if (route.endpoint != Endpoint::kHealth) {
    if (std::optional<AdminResult> standby = backend.standby_answer()) return std::move(*standby);
  }
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
      case Endpoint::kStreams:
        return backend.streams();
      case Endpoint::kDrain: {
        std::string error;
        const std::string name = path_name(route, path, error);
        if (!error.empty()) return bad_request(error);
        return backend.drain_status(name);
      }
      default:
        break;
    }
    return AdminResult::error(500, "internal error: no GET handler for " + std::string(route.path));
  }

  if (!route.suffix.empty()) {
    // The name is in the path; the body is empty or {}.
    std::string error;
    const std::string name = path_name(route, path, error);
    if (!error.empty()) return bad_request(error);
    if (body.find_first_not_of(" \t\r\n") != std::string_view::npos) {
      std::optional<json::value> doc;
      if (std::string e = parse_body(body, doc); !e.empty()) return bad_request(e);
      const json::object* object = doc->if_object();
      if (!object || !object->empty()) {
        return bad_request(endpoint + " takes no body, or {} (the server is named in the path)");
      }
    }
    if (route.endpoint == Endpoint::kDrain) return backend.drain(name);
    return backend.stream_control(name, route.endpoint == Endpoint::kStreamCancel
                                            ? StreamControl::kCancel
                                            : StreamControl::kRestart);
  }
  std::optional<json::value> doc;
  if (std::string e = parse_body(body, doc); !e.empty()) return bad_request(e);
  std::string error;
  JsonObject object = JsonObject::root(*doc, "the request body", UnknownKeys::kReject, error);
  if (!error.empty()) return bad_request(error);
  switch (route.endpoint) {
    case Endpoint::kServers:
      return add_servers(backend, object, error);
    case Endpoint::kServersRemove:
      return remove_servers(backend, object, error);
    case Endpoint::kServersSet:
      return set_server(backend, object, error);
    case Endpoint::kMode:
      return set_mode(backend, object, error);
    case Endpoint::kReplicas:
      return set_replicas(backend, object, error);
    case Endpoint::kAssign:
      return assign(backend, object, error);
    case Endpoint::kSplit:
      return split(backend, object, error);
    case Endpoint::kMerge:
      return merge(backend, object, error);
    case Endpoint::kPurge:
      return purge(backend, object, error);
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
