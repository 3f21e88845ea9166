// Fuzz target for the admin API's request handler (config_server/admin_handler.h).
//
// Input encoding: byte 0 picks the HTTP method (kMethods[byte % 8]); the bytes after it up to the
// first '\n' are the request target (path and query); everything after that '\n' is the body. An
// input without '\n' is a target with an empty body. Seeds: corpus/fuzz_admin_request/.
//
// Invariants, checked with abort() so they hold in release builds too:
//   - handle_admin_request never throws, and answers the same thing twice;
//   - the status is one of 200, 400, 404, 405, 409, 413, 503;
//   - the body is a JSON object whose serialization parses back as one, and is small;
//   - every status but 200 has a non-empty string "error";
//   - a rejected request (400, 404, 405, 413) never reaches the backend; a 200 reached it exactly
//     once (GET /healthz: not at all); 405 and 404 agree with admin_allowed_methods;
//   - what does reach the backend is valid: lo <= hi, valid and distinct server names, counts in
//     range (replicas 1..3 too), an age exactly for "older_than" purges, history limits 1..1000.
#include <boost/json.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>
#include <string_view>

#include "common/routing/table_text.h"
#include "config_server/admin_handler.h"

namespace {

namespace json = boost::json;
namespace http = boost::beast::http;
using imhash::AdminResult;

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_admin_request: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

constexpr http::verb kMethods[8] = {http::verb::get,  http::verb::post,   http::verb::get,
                                    http::verb::post, http::verb::put,    http::verb::delete_,
                                    http::verb::head, http::verb::unknown};

// Checks the arguments it is given and answers 200, or 409 / 503 for the server names "conflict"
// and "busy" so that pass-through statuses are exercised too.
class CheckingBackend : public imhash::AdminBackend {
 public:
  int calls = 0;

  AdminResult status() override { return called("status"); }
  AdminResult table() override { return called("table"); }
  AdminResult history(uint64_t limit) override {
    if (limit < 1 || limit > imhash::kAdminMaxHistoryLimit) violated("history limit", "");
    return called("history");
  }
  AdminResult servers() override { return called("servers"); }
  AdminResult where(uint64_t) override { return called("where"); }
  AdminResult set_mode(imhash::RoutingMode mode, std::optional<imhash::ModuloHash> hash) override {
    if (hash && mode != imhash::RoutingMode::kModulo) violated("modulo_hash outside modulo mode");
    return called("set_mode");
  }
  AdminResult set_replicas(uint32_t replicas) override {
    if (replicas < 1 || replicas > imhash::kMaxReplicas) violated("replicas");
    return called("set_replicas");
  }
  AdminResult add_servers(const std::vector<imhash::ServerSpec>& specs) override {
    if (specs.empty() || specs.size() > imhash::kMaxServers) violated("server count");
    std::set<std::string> names;
    for (const imhash::ServerSpec& s : specs) {
      name(s.name);
      if (!names.insert(s.name).second) violated("duplicate server", s.name);
      if (s.address && s.address->empty()) violated("empty address");
      if (s.shards && (*s.shards < 1 || *s.shards > imhash::kMaxShards)) violated("shards");
      if (s.weight < 1 || s.weight > imhash::kMaxWeight) violated("weight");
    }
    return by_name(specs.front().name, "add_servers");
  }
  AdminResult set_server(const std::string& server, const std::optional<std::string>& address,
                         const std::optional<uint32_t>& weight) override {
    name(server);
    if (!address && !weight) violated("nothing to set", server);
    if (address && address->empty()) violated("empty address");
    if (weight && (*weight < 1 || *weight > imhash::kMaxWeight)) violated("weight");
    return by_name(server, "set_server");
  }
  AdminResult remove_servers(const std::vector<std::string>& list) override {
    if (list.empty() || list.size() > imhash::kMaxServers) violated("name count");
    std::set<std::string> names;
    for (const std::string& n : list) {
      name(n);
      if (!names.insert(n).second) violated("duplicate name", n);
    }
    return by_name(list.front(), "remove_servers");
  }
  AdminResult assign(uint64_t lo, uint64_t hi, const std::string& server) override {
    if (lo > hi) violated("assign lo > hi");
    name(server);
    return by_name(server, "assign");
  }
  AdminResult split(uint64_t) override { return called("split"); }
  AdminResult merge(uint64_t lo, uint64_t hi) override {
    if (lo > hi) violated("merge lo > hi");
    return called("merge");
  }
  AdminResult purge(const std::string& server, imhash::frame::PurgeAction kind,
                    uint32_t age) override {
    name(server);
    using imhash::frame::PurgeAction;
    if (kind == PurgeAction::kStatus) violated("purge kind status");
    if ((kind == PurgeAction::kOlderThan) != (age > 0)) violated("purge age");
    return by_name(server, "purge");
  }
  AdminResult purge_status() override { return called("purge_status"); }
  AdminResult drain(const std::string& server) override {
    name(server);
    return by_name(server, "drain");
  }
  AdminResult drain_status(const std::string& server) override {
    name(server);
    return by_name(server, "drain_status");
  }
  AdminResult streams() override { return called("streams"); }
  AdminResult stream_control(const std::string& server, imhash::StreamControl action) override {
    name(server);
    if (action != imhash::StreamControl::kCancel && action != imhash::StreamControl::kRestart) {
      violated("stream action");
    }
    return by_name(server, "stream_control");
  }

 private:
  static void name(const std::string& n) {
    if (!imhash::is_valid_server_name(n)) violated("invalid server name reached the backend", n);
  }
  AdminResult called(const char* what) {
    ++calls;
    return AdminResult::ok(json::object{{"called", what}});
  }
  AdminResult by_name(const std::string& server, const char* what) {
    if (server == "conflict") {
      ++calls;
      return AdminResult::error(409, "conflict");
    }
    if (server == "busy") {
      ++calls;
      return AdminResult::error(503, "busy");
    }
    return called(what);
  }
};

std::string run(http::verb method, std::string_view target, std::string_view body, int& calls,
                unsigned& status) {
  CheckingBackend backend;
  AdminResult result;
  try {
    result = imhash::handle_admin_request(backend, method, target, body);
  } catch (const std::exception& e) {
    violated("handle_admin_request threw", e.what());
  } catch (...) {
    violated("handle_admin_request threw");
  }
  calls = backend.calls;
  status = result.status;

  switch (status) {
    case 200:
    case 400:
    case 404:
    case 405:
    case 409:
    case 413:
    case 503:
      break;
    default:
      violated("unexpected status", std::to_string(status));
  }
  const json::object* object = result.body.if_object();
  if (!object) violated("body is not an object", json::serialize(result.body));
  const std::string text = json::serialize(result.body);
  json::error_code ec;
  const json::value again = json::parse(text, ec);
  if (ec || !again.is_object()) violated("serialized body does not parse as an object", text);
  if (status != 200) {
    const json::value* error = object->if_contains("error");
    if (!error || !error->is_string() || error->get_string().empty()) {
      violated("error answer without an error sentence", text);
    }
    if (status != 409 && status != 503 && text.size() > 2048) violated("error too long", text);
  }
  return std::to_string(status) + " " + text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const http::verb method = kMethods[data[0] % 8];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t newline = rest.find('\n');
  const std::string_view target = rest.substr(0, newline);
  const std::string_view body =
      newline == std::string_view::npos ? std::string_view{} : rest.substr(newline + 1);

  int calls = 0;
  unsigned status = 0;
  const std::string first = run(method, target, body, calls, status);
  int calls2 = 0;
  unsigned status2 = 0;
  if (run(method, target, body, calls2, status2) != first) violated("not deterministic", first);

  const bool rejected = status == 400 || status == 404 || status == 405 || status == 413;
  if (rejected && calls != 0) violated("a rejected request reached the backend", first);
  const bool health = target.substr(0, target.find('?')) == "/healthz";
  if (status == 200 && calls != (health ? 0 : 1)) violated("backend calls for a 200", first);
  if (!rejected && status != 200 && calls != 1) violated("pass-through without a call", first);
  const std::string_view allowed = imhash::admin_allowed_methods(target);
  if ((status == 404) != allowed.empty()) violated("404 and admin_allowed_methods disagree", first);
  if (status == 405 && (method == http::verb::get || method == http::verb::post) &&
      allowed.find(http::to_string(method)) != std::string_view::npos) {
    violated("405 for an allowed method", first);
  }
  return 0;
}
