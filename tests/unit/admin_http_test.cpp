// Tests of the admin API: the pure request handler (routing, query and body validation, what
// reaches the backend) and the HTTP server on loopback (keep-alive, pipelining, limits, stop).
#include "config_server/admin_http.h"

#include <doctest/doctest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/routing/table_text.h"
#include "harness/wait_until.h"

namespace imhash {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using http::verb;
using tcp = asio::ip::tcp;

// Records every call as one line ("assign 1 2000 hash4") and answers `reply`.
class FakeBackend : public AdminBackend {
 public:
  AdminResult reply = AdminResult::ok(json::object{{"fake", true}});
  std::optional<AdminResult> standby;  // set: answers as a standby config server
  std::optional<AdminResult> standby_answer() override { return standby; }

  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  std::string last() const {
    std::lock_guard lock(mutex_);
    return calls_.empty() ? std::string("(none)") : calls_.back();
  }

  AdminResult status() override { return record("status"); }
  AdminResult table() override { return record("table"); }
  AdminResult history(uint64_t limit) override {
    return record("history " + std::to_string(limit));
  }
  AdminResult servers() override { return record("servers"); }
  AdminResult where(uint64_t id) override { return record("where " + std::to_string(id)); }
  AdminResult set_mode(RoutingMode mode, std::optional<ModuloHash> hash) override {
    return record(std::string("set_mode ") + to_string(mode) + " " +
                  (hash ? to_string(*hash) : "-"));
  }
  AdminResult set_replicas(uint32_t replicas) override {
    return record("set_replicas " + std::to_string(replicas));
  }
  AdminResult add_servers(const std::vector<ServerSpec>& servers) override {
    std::string line = "add_servers";
    for (const ServerSpec& s : servers) {
      line += " " + s.name + "=" + s.address.value_or("-") + "/" +
              (s.shards ? std::to_string(*s.shards) : "-") + "*" + std::to_string(s.weight);
    }
    return record(line);
  }
  AdminResult set_server(const std::string& name, const std::optional<std::string>& address,
                         const std::optional<uint32_t>& weight) override {
    return record("set_server " + name + " " + address.value_or("-") + " " +
                  (weight ? std::to_string(*weight) : "-"));
  }
  AdminResult remove_servers(const std::vector<std::string>& names) override {
    std::string line = "remove_servers";
    for (const std::string& n : names) line += " " + n;
    return record(line);
  }
  AdminResult assign(uint64_t lo, uint64_t hi, const std::string& server) override {
    return record("assign " + std::to_string(lo) + " " + std::to_string(hi) + " " + server);
  }
  AdminResult split(uint64_t at) override { return record("split " + std::to_string(at)); }
  AdminResult merge(uint64_t lo, uint64_t hi) override {
    return record("merge " + std::to_string(lo) + " " + std::to_string(hi));
  }
  AdminResult purge(const std::string& server, frame::PurgeAction kind,
                    uint32_t age_seconds) override {
    return record("purge " + server + " " + std::to_string(static_cast<int>(kind)) + " " +
                  std::to_string(age_seconds));
  }
  AdminResult purge_status() override { return record("purge_status"); }
  AdminResult drain(const std::string& server) override { return record("drain " + server); }
  AdminResult drain_status(const std::string& server) override {
    return record("drain_status " + server);
  }
  AdminResult streams() override { return record("streams"); }
  AdminResult stream_control(const std::string& server, StreamControl action) override {
    return record(
        std::string(action == StreamControl::kCancel ? "stream_cancel " : "stream_restart ") +
        server);
  }

 private:
  AdminResult record(std::string line) {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(line));
    return reply;
  }

  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
};

std::string error_of(const AdminResult& r) {
  const json::object* o = r.body.if_object();
  if (!o || !o->contains("error") || !o->at("error").is_string()) return "(no error)";
  return std::string(o->at("error").get_string());
}

// One request through the handler; checks that a rejected request did not reach the backend.
AdminResult call(FakeBackend& b, verb method, std::string_view target, std::string_view body = {}) {
  const size_t before = b.calls().size();
  AdminResult r = handle_admin_request(b, method, target, body);
  CHECK(r.body.is_object());
  if (r.status == 400 || r.status == 404 || r.status == 405 || r.status == 413) {
    CHECK(b.calls().size() == before);
  }
  return r;
}

// POST `body` to `target`; expects a 200 and returns the backend call it made.
std::string post_ok(std::string_view target, std::string_view body) {
  FakeBackend b;
  AdminResult r = call(b, verb::post, target, body);
  INFO(target, " ", body, " -> ", error_of(r));
  CHECK(r.status == 200);
  return b.last();
}

// Expects a 400 and returns its error sentence.
std::string post_bad(std::string_view target, std::string_view body) {
  FakeBackend b;
  AdminResult r = call(b, verb::post, target, body);
  INFO(target, " ", body);
  CHECK(r.status == 400);
  return error_of(r);
}

TEST_CASE("admin_http: GET endpoints reach the backend with their arguments") {
  FakeBackend b;
  CHECK(call(b, verb::get, "/v1/status").status == 200);
  CHECK(b.last() == "status");
  CHECK(call(b, verb::get, "/v1/table").status == 200);
  CHECK(b.last() == "table");
  CHECK(call(b, verb::get, "/v1/servers").status == 200);
  CHECK(b.last() == "servers");
  CHECK(call(b, verb::get, "/v1/purge").status == 200);
  CHECK(b.last() == "purge_status");
  CHECK(call(b, verb::get, "/v1/history").status == 200);
  CHECK(b.last() == "history 20");
  CHECK(call(b, verb::get, "/v1/history?limit=5").status == 200);
  CHECK(b.last() == "history 5");
  CHECK(call(b, verb::get, "/v1/history?limit=1000").status == 200);
  CHECK(b.last() == "history 1000");
  CHECK(call(b, verb::get, "/v1/where/42").status == 200);
  CHECK(b.last() == "where 42");
  CHECK(call(b, verb::get, "/v1/where/0").status == 200);
  CHECK(b.last() == "where 0");
  CHECK(call(b, verb::get, "/v1/where/18446744073709551615").status == 200);
  CHECK(b.last() == "where 18446744073709551615");
  // A body on a GET is ignored.
  CHECK(call(b, verb::get, "/v1/status", "{\"junk\"").status == 200);
  CHECK(b.calls().size() == 11);
  // The backend's body comes back unchanged.
  CHECK(json::serialize(call(b, verb::get, "/v1/table").body) == R"({"fake":true})");
}

TEST_CASE("admin_http: drains and streams (issue 13)") {
  FakeBackend b;
  CHECK(call(b, verb::post, "/v1/servers/hash3/drain").status == 200);
  CHECK(b.last() == "drain hash3");
  CHECK(call(b, verb::post, "/v1/servers/hash3/drain", " {} ").status == 200);
  CHECK(b.last() == "drain hash3");
  CHECK(call(b, verb::get, "/v1/servers/hash3/drain").status == 200);
  CHECK(b.last() == "drain_status hash3");
  CHECK(call(b, verb::get, "/v1/streams").status == 200);
  CHECK(b.last() == "streams");
  CHECK(call(b, verb::post, "/v1/streams/hash1/cancel").status == 200);
  CHECK(b.last() == "stream_cancel hash1");
  CHECK(call(b, verb::post, "/v1/streams/hash1/restart", "{}").status == 200);
  CHECK(b.last() == "stream_restart hash1");
  CHECK(call(b, verb::post, "/v1/streams/h%2d1/restart", "{}").status == 200);
  CHECK(b.last() == "stream_restart h-1");
  CHECK(b.calls().size() == 7);
  // The exact endpoints beside the patterns still route as before.
  CHECK(call(b, verb::post, "/v1/servers/remove", R"({"names": ["a"]})").status == 200);
  CHECK(b.last() == "remove_servers a");

  AdminResult r = call(b, verb::post, "/v1/servers/hash3/drain", R"({"force": true})");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "POST /v1/servers/NAME/drain takes no body, or {} (the server is named in the path)");
  r = call(b, verb::post, "/v1/servers/hash3/drain", "[]");
  CHECK(r.status == 400);
  r = call(b, verb::post, "/v1/servers/bad%20name/drain");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "\"bad%20name\" is not a server name, 1 to 64 characters of A-Z a-z 0-9 . _ -");
  CHECK(call(b, verb::get, "/v1/servers//drain").status == 404);
  CHECK(call(b, verb::get, "/v1/servers/a/b/drain").status == 404);
  CHECK(call(b, verb::get, "/v1/streams/hash1").status == 404);
  CHECK(call(b, verb::get, "/v1/streams/hash1/pause").status == 404);
  r = call(b, verb::get, "/v1/streams/hash1/cancel");
  CHECK(r.status == 405);
  CHECK(error_of(r) == "method GET is not allowed on /v1/streams/hash1/cancel (allowed: POST)");
  CHECK(call(b, verb::post, "/v1/streams", "{}").status == 405);
  r = call(b, verb::get, "/v1/servers/hash3/drain?x=1");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "unknown query parameter \"x\" for GET /v1/servers/NAME/drain (it takes none)");
  CHECK(admin_allowed_methods("/v1/servers/hash3/drain") == "GET, POST");
  CHECK(admin_allowed_methods("/v1/streams/hash3/restart") == "POST");
  CHECK(admin_allowed_methods("/v1/streams") == "GET");
  CHECK(b.calls().size() == 8);
  // The backend's 404 for an unknown name comes back as it is.
  b.reply = AdminResult::error(404, "unknown hash server nope");
  r = handle_admin_request(b, verb::post, "/v1/streams/nope/cancel", "");
  CHECK(r.status == 404);
  CHECK(error_of(r) == "unknown hash server nope");
}

TEST_CASE("admin_http: healthz answers without the backend") {
  FakeBackend b;
  AdminResult r = call(b, verb::get, "/healthz");
  CHECK(r.status == 200);
  CHECK(json::serialize(r.body) == R"({"ok":true})");
  CHECK(b.calls().empty());
  CHECK(call(b, verb::post, "/healthz", "{}").status == 405);
}

TEST_CASE("admin_http: a standby answers every request but healthz itself, before the backend") {
  FakeBackend b;
  b.standby = AdminResult::error(503, "this config server (cfg1) is a standby; the leader is cfg0");
  // A struct, not a tuple: clang 14 cannot capture structured bindings (CAPTURE).
  struct Request {
    verb method;
    std::string target;
    std::string body;
  };
  for (const Request& q :
       std::vector<Request>{{verb::get, "/v1/status", ""},
                            {verb::get, "/v1/history?limit=5", ""},
                            {verb::get, "/v1/where/7", ""},
                            {verb::post, "/v1/assign", R"({"lo": 1, "hi": 2, "server": "hash1"})"},
                            {verb::post, "/v1/servers/hash1/drain", ""}}) {
    CAPTURE(q.target);
    const AdminResult r = call(b, q.method, q.target, q.body);
    CHECK(r.status == 503);
    CHECK(error_of(r).find("standby") != std::string::npos);
  }
  CHECK(b.calls().empty());
  CHECK(call(b, verb::get, "/healthz").status == 200);
  CHECK(call(b, verb::get, "/v1/nothing").status == 404);
  b.standby.reset();
  CHECK(call(b, verb::get, "/v1/status").status == 200);
  CHECK(b.last() == "status");
}

TEST_CASE("admin_http: POST /v1/mode") {
  CHECK(post_ok("/v1/mode", R"({"mode": "range"})") == "set_mode range -");
  CHECK(post_ok("/v1/mode", R"({"mode": "ring"})") == "set_mode ring -");
  CHECK(post_ok("/v1/mode", R"({"mode": "modulo", "modulo_hash": "identity"})") ==
        "set_mode modulo identity");
  CHECK(post_ok("/v1/mode", R"({"modulo_hash": "mix", "mode": "modulo"})") ==
        "set_mode modulo mix");
  CHECK(post_bad("/v1/mode", R"({"mode": "hash"})") ==
        R"("mode" must be "modulo", "range" or "ring" (got "hash"))");
  CHECK(post_bad("/v1/mode", R"({})") == R"("mode" is missing)");
  CHECK(post_bad("/v1/mode", R"({"mode": 1})") ==
        R"("mode" must be "modulo", "range" or "ring", not a number)");
  CHECK(post_bad("/v1/mode", R"({"mode": "modulo", "modulo_hash": "md5"})") ==
        R"("modulo_hash" must be "mix" or "identity" (got "md5"))");
  CHECK(post_bad("/v1/mode", R"({"mode": "ring", "modulo_hash": "mix"})") ==
        R"("modulo_hash" applies to mode "modulo" only, not "ring")");
  CHECK(post_bad("/v1/mode", R"({"mode": "ring", "moduloHash": "mix"})") ==
        R"(unknown key "moduloHash" (expected mode, modulo_hash))");
}

TEST_CASE("admin_http: POST /v1/replicas") {
  CHECK(post_ok("/v1/replicas", R"({"replicas": 2})") == "set_replicas 2");
  CHECK(post_ok("/v1/replicas", R"({"replicas": 1})") == "set_replicas 1");
  CHECK(post_ok("/v1/replicas", R"({"replicas": 3})") == "set_replicas 3");
  CHECK(post_bad("/v1/replicas", R"({"replicas": 0})") ==
        R"("replicas" must be an integer between 1 and 3 (got 0))");
  CHECK(post_bad("/v1/replicas", R"({"replicas": 4})") ==
        R"("replicas" must be an integer between 1 and 3 (got 4))");
  CHECK(post_bad("/v1/replicas", R"({"replicas": "2"})") ==
        R"("replicas" must be an integer between 1 and 3, not a string)");
  CHECK(post_bad("/v1/replicas", R"({"replicas": 2.0})")
            .starts_with(R"("replicas" must be an integer between 1 and 3)"));
  CHECK(post_bad("/v1/replicas", R"({})") == R"("replicas" is missing)");
  CHECK(post_bad("/v1/replicas", R"({"replicas": 2, "copies": 2})") ==
        R"(unknown key "copies" (expected replicas))");
  CHECK(post_bad("/v1/replicas", "") ==
        "the request body is empty; this endpoint takes a JSON object");
  FakeBackend b;
  CHECK(call(b, verb::get, "/v1/replicas").status == 405);
  CHECK(admin_allowed_methods("/v1/replicas") == "POST");
}

TEST_CASE("admin_http: POST /v1/servers/set changes a server's address or weight") {
  CHECK(post_ok("/v1/servers/set", R"({"name": "hash1", "address": "10.0.0.11:7001"})") ==
        "set_server hash1 10.0.0.11:7001 -");
  CHECK(post_ok("/v1/servers/set", R"({"name": "hash1", "weight": 3})") == "set_server hash1 - 3");
  CHECK(post_ok("/v1/servers/set", R"({"name": "h", "address": "[::1]:7001", "weight": 2})") ==
        "set_server h [::1]:7001 2");
  CHECK(post_bad("/v1/servers/set", R"({"name": "hash1"})") ==
        R"(nothing to change: give "address", "weight" or both)");
  CHECK(post_bad("/v1/servers/set", R"({"address": "a:1"})") == R"("name" is missing)");
  CHECK(
      post_bad("/v1/servers/set", R"({"name": "h", "address": "[::]:7001"})") ==
      R"("address" is an unspecified address, which login servers cannot dial (got "[::]:7001"); give the address they reach the server at)");
  CHECK(post_bad("/v1/servers/set", R"({"name": "h", "weight": 0})") ==
        R"("weight" must be an integer between 1 and 1000 (got 0))");
  CHECK(post_bad("/v1/servers/set", R"({"name": "h", "shards": 2})") ==
        R"(unknown key "shards" (expected name, address, weight))");
}

TEST_CASE("admin_http: POST /v1/servers adds, /v1/servers/remove removes") {
  CHECK(post_ok("/v1/servers",
                R"({"servers": [{"name": "hash4", "address": "127.0.0.1:7004", "shards": 4,
                                 "weight": 2}, {"name": "hash5"}]})") ==
        "add_servers hash4=127.0.0.1:7004/4*2 hash5=-/-*1");
  CHECK(post_ok("/v1/servers", R"({"servers": [{"name": "h", "address": "[::1]:7000"}]})") ==
        "add_servers h=[::1]:7000/-*1");
  CHECK(post_ok("/v1/servers/remove", R"({"names": ["hash1", "hash2"]})") ==
        "remove_servers hash1 hash2");

  CHECK(post_bad("/v1/servers", R"({})") == R"("servers" is missing)");
  CHECK(post_bad("/v1/servers", R"({"servers": []})") == R"("servers" must not be empty)");
  CHECK(post_bad("/v1/servers", R"({"servers": {}})") ==
        R"("servers" must be an array, not an object)");
  CHECK(post_bad("/v1/servers", R"({"servers": ["hash4"]})") ==
        R"("servers[0]" must be an object, not a string)");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"address": "a:1"}]})") ==
        R"("servers[0].name" is missing)");
  CHECK(
      post_bad("/v1/servers", R"({"servers": [{"name": "bad name"}]})") ==
      R"("servers[0].name" must be a server name, 1 to 64 characters of A-Z a-z 0-9 . _ - (got "bad name"))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "shards": 0}]})") ==
        R"("servers[0].shards" must be an integer between 1 and 1024 (got 0))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "shards": "4"}]})") ==
        R"("servers[0].shards" must be an integer between 1 and 1024, not a string)");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "weight": 1001}]})") ==
        R"("servers[0].weight" must be an integer between 1 and 1000 (got 1001))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "weight": -1}]})") ==
        R"("servers[0].weight" must be an integer between 1 and 1000 (got -1))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "address": "nohost"}]})") ==
        R"("servers[0].address" is not HOST:PORT (got "nohost"))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "address": "a:0"}]})") ==
        R"("servers[0].address" does not end in a port between 1 and 65535 (got "a:0"))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "address": ""}]})") ==
        R"("servers[0].address" must not be empty (leave it out to use the node's own))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h", "port": 1}]})") ==
        R"(unknown key "servers[0].port" (expected name, address, shards, weight))");
  CHECK(post_bad("/v1/servers", R"({"servers": [{"name": "h"}, {"name": "h"}]})") ==
        R"("servers[1].name" repeats "h" (each server may be listed once))");
  CHECK(
      post_bad("/v1/servers", R"({"servers": [{"name": "h", "address": "0.0.0.0:7001"}]})") ==
      R"("servers[0].address" is an unspecified address, which login servers cannot dial (got "0.0.0.0:7001"); give the address they reach the server at)");
  std::string many = R"({"servers": [)";
  for (int i = 0; i < 1025; ++i)
    many += std::string(i ? "," : "") + R"({"name": "h)" + std::to_string(i) + "\"}";
  CHECK(post_bad("/v1/servers", many + "]}") ==
        R"("servers" has 1025 entries; at most 1024 are allowed)");

  CHECK(post_bad("/v1/servers/remove", R"({"names": []})") == R"("names" must not be empty)");
  CHECK(post_bad("/v1/servers/remove", R"({"names": [1]})") ==
        R"("names[0]" must be a string, not a number)");
  CHECK(post_bad("/v1/servers/remove", R"({"names": ["a", "a"]})") ==
        R"("names[1]" repeats "a" (each server may be listed once))");
  CHECK(post_bad("/v1/servers/remove", R"({"names": ["a/b"]})") ==
        R"("names[0]" must be a server name, 1 to 64 characters of A-Z a-z 0-9 . _ - (got "a/b"))");
  CHECK(post_bad("/v1/servers/remove", R"({"name": ["a"]})") == R"("names" is missing)");
  CHECK(post_bad("/v1/servers/remove", R"({"names": ["a"], "name": ["b"]})") ==
        R"(unknown key "name" (expected names))");
}

TEST_CASE("admin_http: POST /v1/assign, /v1/split, /v1/merge") {
  CHECK(post_ok("/v1/assign", R"({"lo": 1, "hi": 2000, "server": "hash4"})") ==
        "assign 1 2000 hash4");
  CHECK(post_ok("/v1/assign", R"({"lo": 7, "hi": 7, "server": "h"})") == "assign 7 7 h");
  CHECK(post_ok("/v1/split", R"({"at": 1000})") == "split 1000");
  CHECK(post_ok("/v1/split", R"({"at": 0})") == "split 0");
  CHECK(post_ok("/v1/merge", R"({"lo": 0, "hi": 5000})") == "merge 0 5000");

  CHECK(post_bad("/v1/assign", R"({"lo": 5, "hi": 3, "server": "h"})") ==
        "range 5-3: lo is greater than hi");
  CHECK(post_bad("/v1/merge", R"({"lo": 5, "hi": 3})") == "range 5-3: lo is greater than hi");
  CHECK(post_bad("/v1/assign", R"({"lo": 1, "server": "h"})") == R"("hi" is missing)");
  CHECK(post_bad("/v1/assign", R"({"lo": 1, "hi": 2})") == R"("server" is missing)");
  CHECK(post_bad("/v1/assign", R"({"lo": 1, "hi": 2, "server": ""})") ==
        R"("server" must be a server name, 1 to 64 characters of A-Z a-z 0-9 . _ - (got ""))");
  CHECK(post_bad("/v1/assign", R"({"lo": -1, "hi": 2, "server": "h"})") ==
        R"("lo" must be an integer between 0 and 18446744073709551615 (got -1))");
  CHECK(post_bad("/v1/assign", R"({"lo": 1.5, "hi": 2, "server": "h"})") ==
        R"("lo" must be an integer between 0 and 18446744073709551615 (got 1.5E0))");
  CHECK(post_bad("/v1/assign", R"({"lo": true, "hi": 2, "server": "h"})") ==
        R"("lo" must be an id (an integer or a decimal string), not a boolean)");
  CHECK(post_bad("/v1/assign", R"({"lo": null, "hi": 2, "server": "h"})") ==
        R"("lo" must be an id (an integer or a decimal string), not null)");
  CHECK(post_bad("/v1/assign", R"({"lo": 1, "hi": 2, "server": "h", "shard": 1})") ==
        R"(unknown key "shard" (expected lo, hi, server))");
  CHECK(post_bad("/v1/split", R"({})") == R"("at" is missing)");
  CHECK(post_bad("/v1/split", R"({"at": "0x10"})") ==
        R"("at" must be a decimal id between 0 and 18446744073709551615 (got "0x10"))");
  CHECK(post_bad("/v1/merge", R"({"lo": "1", "hi": "2", "x": 0})") ==
        R"(unknown key "x" (expected lo, hi))");
}

TEST_CASE("admin_http: ids above 2^53 as decimal strings and as integers") {
  // 2^53 + 1 is where doubles stop being exact: it must arrive unrounded either way.
  CHECK(post_ok("/v1/split", R"({"at": "9007199254740993"})") == "split 9007199254740993");
  CHECK(post_ok("/v1/split", R"({"at": 9007199254740993})") == "split 9007199254740993");
  CHECK(post_ok("/v1/assign",
                R"({"lo": "9223372036854775808", "hi": "18446744073709551615", "server": "h"})") ==
        "assign 9223372036854775808 18446744073709551615 h");
  CHECK(post_ok("/v1/merge", R"({"lo": 0, "hi": 18446744073709551615})") ==
        "merge 0 18446744073709551615");
  CHECK(post_ok("/v1/split", R"({"at": "007"})") == "split 7");
  // One past the top, as a string and as a number (which JSON readers make a double).
  CHECK(
      post_bad("/v1/split", R"({"at": "18446744073709551616"})") ==
      R"("at" must be a decimal id between 0 and 18446744073709551615 (got "18446744073709551616"))");
  CHECK(post_bad("/v1/split", R"({"at": 18446744073709551616})")
            .starts_with(R"("at" must be an integer between 0 and 18446744073709551615 (got )"));
  for (const char* bad : {R"("")", R"(" 1")", R"("1 ")", R"("+1")", R"("-1")", R"("1e3")",
                          R"("１")", R"("000000000000000000001")"}) {
    CHECK(post_bad("/v1/split", std::string(R"({"at": )") + bad + "}")
              .starts_with(R"("at" must be a decimal id)"));
  }
}

TEST_CASE("admin_http: POST /v1/purge") {
  using frame::PurgeAction;
  auto expect = [](PurgeAction kind, uint32_t age) {
    return "purge hash1 " + std::to_string(static_cast<int>(kind)) + " " + std::to_string(age);
  };
  CHECK(post_ok("/v1/purge", R"({"server": "hash1", "kind": "not_owned"})") ==
        expect(PurgeAction::kNotOwned, 0));
  CHECK(post_ok("/v1/purge", R"({"server": "hash1", "kind": "older_than", "age_s": 7200})") ==
        expect(PurgeAction::kOlderThan, 7200));
  CHECK(post_ok("/v1/purge", R"({"server": "hash1", "kind": "older_than", "age_s": 4294967295})") ==
        expect(PurgeAction::kOlderThan, 4294967295u));
  CHECK(post_ok("/v1/purge", R"({"server": "hash1", "kind": "all"})") ==
        expect(PurgeAction::kAll, 0));
  CHECK(post_ok("/v1/purge", R"({"kind": "cancel", "server": "hash1"})") ==
        expect(PurgeAction::kCancel, 0));

  CHECK(post_bad("/v1/purge", R"({"server": "hash1"})") == R"("kind" is missing)");
  CHECK(post_bad("/v1/purge", R"({"kind": "all"})") == R"("server" is missing)");
  CHECK(post_bad("/v1/purge", R"({"server": "hash1", "kind": "status"})") ==
        R"("kind" must be "not_owned", "older_than", "all" or "cancel" (got "status"))");
  CHECK(post_bad("/v1/purge", R"({"server": "hash1", "kind": "older_than"})") ==
        R"("age_s" is missing (kind "older_than" needs it))");
  CHECK(post_bad("/v1/purge", R"({"server": "hash1", "kind": "older_than", "age_s": 0})") ==
        R"("age_s" must be an integer between 1 and 4294967295 (got 0))");
  CHECK(
      post_bad("/v1/purge", R"({"server": "hash1", "kind": "older_than", "age_s": 4294967296})") ==
      R"("age_s" must be an integer between 1 and 4294967295 (got 4294967296))");
  CHECK(post_bad("/v1/purge", R"({"server": "hash1", "kind": "all", "age_s": 5})") ==
        R"("age_s" applies to kind "older_than" only, not "all")");
}

TEST_CASE("admin_http: malformed bodies are 400 naming the problem") {
  CHECK(post_bad("/v1/split", "") ==
        "the request body is empty; this endpoint takes a JSON object");
  CHECK(post_bad("/v1/split", " \r\n") ==
        "the request body is empty; this endpoint takes a JSON object");
  CHECK(post_bad("/v1/split", "[1]") == "the request body must be a JSON object, not an array");
  CHECK(post_bad("/v1/split", "42") == "the request body must be a JSON object, not a number");
  CHECK(post_bad("/v1/split", "{\"at\": 1,\n \"at\": 2}") ==
        R"(duplicate key "at" at line 2, column 5 (each key may appear once in an object))");
  CHECK(post_bad("/v1/split", "{\"at\": 1} {}").starts_with("invalid JSON at line 1, column 11"));
  CHECK(post_bad("/v1/split", "{\"at\": }").starts_with("invalid JSON at line 1, column 8: "));
  CHECK(post_bad("/v1/split", "{\"at\": 1").starts_with("invalid JSON at line 1, column 9: "));
  CHECK(post_bad("/v1/split", "{\"at\": \"\xff\"}").starts_with("invalid JSON at line 1"));
  std::string deep(100, '[');
  CHECK(post_bad("/v1/split", "{\"at\": " + deep + "}").starts_with("invalid JSON at line 1"));
}

TEST_CASE("admin_http: unknown paths are 404") {
  FakeBackend b;
  for (const char* target : {"/", "", "/v1", "/v1/", "/v1/nope", "/v1/status/", "/V1/status",
                             "/v1/where", "/v1/where/5/6", "/v2/status", "v1/status",
                             "http://localhost/v1/status", "/v1/servers/remove/x", "*"}) {
    INFO(target);
    AdminResult r = call(b, verb::get, target);
    CHECK(r.status == 404);
    CHECK(error_of(r).starts_with("no such endpoint: "));
    CHECK(admin_allowed_methods(target).empty());
  }
  CHECK(error_of(call(b, verb::get, "/v1/nope?x=1")) == "no such endpoint: /v1/nope");
  CHECK(error_of(call(b, verb::get, "/v1/\x01\xff")) == R"(no such endpoint: /v1/\x01\xff)");
  CHECK(b.calls().empty());
}

TEST_CASE("admin_http: wrong methods are 405 naming the allowed ones") {
  FakeBackend b;
  struct Case {
    verb method;
    const char* target;
    const char* error;
  };
  const Case cases[] = {
      {verb::get, "/v1/mode", "method GET is not allowed on /v1/mode (allowed: POST)"},
      {verb::put, "/v1/mode", "method PUT is not allowed on /v1/mode (allowed: POST)"},
      {verb::post, "/v1/status", "method POST is not allowed on /v1/status (allowed: GET)"},
      {verb::post, "/v1/where/5", "method POST is not allowed on /v1/where/5 (allowed: GET)"},
      {verb::delete_, "/v1/servers",
       "method DELETE is not allowed on /v1/servers (allowed: GET, POST)"},
      {verb::head, "/healthz", "method HEAD is not allowed on /healthz (allowed: GET)"},
      {verb::get, "/v1/servers/remove",
       "method GET is not allowed on /v1/servers/remove (allowed: POST)"},
      {verb::unknown, "/v1/purge",
       "method (unknown) is not allowed on /v1/purge (allowed: GET, POST)"},
  };
  for (const Case& c : cases) {
    AdminResult r = call(b, c.method, c.target, "{}");
    CHECK(r.status == 405);
    CHECK(error_of(r) == c.error);
  }
  CHECK(admin_allowed_methods("/v1/servers?x") == "GET, POST");
  CHECK(admin_allowed_methods("/v1/assign") == "POST");
  CHECK(admin_allowed_methods("/v1/where/1") == "GET");
  CHECK(b.calls().empty());
}

TEST_CASE("admin_http: query parsing") {
  FakeBackend b;
  auto history = [&](std::string_view target) { return call(b, verb::get, target); };
  CHECK(history("/v1/history?").status == 200);
  CHECK(b.last() == "history 20");
  CHECK(history("/v1/history?limit=%31%30").status == 200);
  CHECK(b.last() == "history 10");
  CHECK(history("/v1/history?&limit=3&").status == 200);
  CHECK(b.last() == "history 3");
  CHECK(history("/v1/history?%6cimit=4").status == 200);
  CHECK(b.last() == "history 4");
  const size_t calls = b.calls().size();

  CHECK(error_of(history("/v1/history?limit=0")) ==
        R"("limit" must be an integer between 1 and 1000 (got "0"))");
  CHECK(error_of(history("/v1/history?limit=1001")) ==
        R"("limit" must be an integer between 1 and 1000 (got "1001"))");
  CHECK(error_of(history("/v1/history?limit=")) ==
        R"("limit" must be an integer between 1 and 1000 (got ""))");
  CHECK(error_of(history("/v1/history?limit")) ==
        R"("limit" must be an integer between 1 and 1000 (got ""))");
  CHECK(error_of(history("/v1/history?limit=-1")) ==
        R"("limit" must be an integer between 1 and 1000 (got "-1"))");
  CHECK(error_of(history("/v1/history?limit=99999999999999999999999")) ==
        R"("limit" must be an integer between 1 and 1000 (got "99999999999999999999999"))");
  CHECK(error_of(history("/v1/history?limit=1&limit=2")) ==
        R"(query parameter "limit" is given twice)");
  CHECK(error_of(history("/v1/history?lmit=2")) ==
        R"(unknown query parameter "lmit" for GET /v1/history (it takes: limit))");
  CHECK(error_of(history("/v1/history?limit=%zz")) ==
        R"(bad percent-escape in the query parameter "limit=%zz")");
  CHECK(error_of(history("/v1/history?limit=%3")) ==
        R"(bad percent-escape in the query parameter "limit=%3")");
  CHECK(error_of(call(b, verb::get, "/v1/status?pretty=1")) ==
        R"(unknown query parameter "pretty" for GET /v1/status (it takes none))");
  CHECK(error_of(call(b, verb::get, "/v1/where/5?x")) ==
        R"(unknown query parameter "x" for GET /v1/where/ID (it takes none))");
  CHECK(error_of(call(b, verb::post, "/v1/split?at=5", R"({"at": 5})")) ==
        R"(unknown query parameter "at" for POST /v1/split (it takes none))");
  CHECK(b.calls().size() == calls);
  CHECK(call(b, verb::get, "/v1/status?").status == 200);
}

TEST_CASE("admin_http: bad ids in /v1/where are 400") {
  FakeBackend b;
  CHECK(error_of(call(b, verb::get, "/v1/where/")) == "missing id: use GET /v1/where/ID");
  for (const char* id : {"abc", "-1", "18446744073709551616", "1.0", "%31", "+5", "0x1f"}) {
    AdminResult r = call(b, verb::get, std::string("/v1/where/") + id);
    CHECK(r.status == 400);
    CHECK(error_of(r) == std::string("\"") + id +
                             "\" is not an id: expected a decimal integer between 0 and "
                             "18446744073709551615");
  }
  CHECK(b.calls().empty());
}

TEST_CASE("admin_http: an oversized body is 413") {
  FakeBackend b;
  const std::string body(kAdminMaxBodyBytes + 1, ' ');
  AdminResult r = call(b, verb::post, "/v1/split", body);
  CHECK(r.status == 413);
  CHECK(error_of(r) == "the request body is 1048577 bytes; at most 1048576 are allowed");
  // Exactly the limit is read (and here found empty).
  CHECK(call(b, verb::post, "/v1/split", std::string(kAdminMaxBodyBytes, ' ')).status == 400);
}

TEST_CASE("admin_http: the backend's answers pass through, a throwing backend is a 500") {
  FakeBackend b;
  b.reply = AdminResult::error(409, "the range 1-5 is not on one server");
  AdminResult r = call(b, verb::post, "/v1/merge", R"({"lo": 1, "hi": 5})");
  CHECK(r.status == 409);
  CHECK(error_of(r) == "the range 1-5 is not on one server");
  b.reply = AdminResult::error(503, "the state directory is not writable");
  CHECK(call(b, verb::get, "/v1/table").status == 503);

  struct Throwing : FakeBackend {
    AdminResult status() override { throw std::runtime_error("boom"); }
  } t;
  r = call(t, verb::get, "/v1/status");
  CHECK(r.status == 500);
  CHECK(error_of(r) == "internal error: boom");
}

TEST_CASE("admin_http: printable and parse_decimal_id") {
  CHECK(printable("abc") == "abc");
  CHECK(printable(std::string_view("a\0b\n\xff", 5)) == "a\\x00b\\x0a\\xff");
  CHECK(printable("abcdef", 3) == "abc...");
  CHECK(parse_decimal_id("0") == 0u);
  CHECK(parse_decimal_id("18446744073709551615") == 18446744073709551615u);
  CHECK(!parse_decimal_id("18446744073709551616"));
  CHECK(!parse_decimal_id(""));
  CHECK(!parse_decimal_id("1a"));
  CHECK(!parse_decimal_id("-0"));
}

// ---- The HTTP server on loopback ----------------------------------------------------------------

// An AdminHttpServer with a FakeBackend on its own io_context thread, on 127.0.0.1:0.
class LiveServer {
 public:
  explicit LiveServer(AdminHttpLimits limits = {})
      : server_(std::make_unique<AdminHttpServer>(ctx_, backend, "127.0.0.1", 0, limits)) {
    server_->start();
    thread_ = std::thread([this] { ctx_.run(); });
  }
  ~LiveServer() { stop(); }

  uint16_t port() const {
    const std::string a = server_->local_address();
    return static_cast<uint16_t>(std::stoi(a.substr(a.rfind(':') + 1)));
  }
  std::string address() const { return server_->local_address(); }
  // Stops the server on its thread; the thread ends once every connection is closed.
  void stop() {
    if (!thread_.joinable()) return;
    asio::post(ctx_, [this] { server_->stop(); });
    thread_.join();
  }
  size_t connections() {
    std::promise<size_t> p;
    asio::post(ctx_, [&] { p.set_value(server_->connections()); });
    return p.get_future().get();
  }

  FakeBackend backend;

 private:
  asio::io_context ctx_;
  std::unique_ptr<AdminHttpServer> server_;
  std::thread thread_;
};

struct Client {
  asio::io_context ctx;
  tcp::socket socket{ctx};
  beast::flat_buffer buffer;

  explicit Client(uint16_t port) { socket.connect({asio::ip::make_address("127.0.0.1"), port}); }
  void send(std::string_view raw) { asio::write(socket, asio::buffer(raw.data(), raw.size())); }
  http::response<http::string_body> read() {
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res;
  }
  http::response<http::string_body> request(verb method, std::string target,
                                            std::string body = {}) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "localhost");
    if (method != verb::get) req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(socket, req);
    return read();
  }
  // True if the server closed the connection (reads EOF or a reset, nothing else).
  bool closed() {
    char c;
    boost::system::error_code ec;
    const size_t n = socket.read_some(asio::buffer(&c, 1), ec);
    return n == 0 && (ec == asio::error::eof || ec == asio::error::connection_reset);
  }
};

std::string error_of(const http::response<http::string_body>& res) {
  json::error_code ec;
  json::value v = json::parse(res.body(), ec);
  if (ec || !v.is_object() || !v.as_object().contains("error")) return "(no error)";
  return std::string(v.as_object().at("error").as_string());
}

TEST_CASE("admin_http: server answers JSON on loopback") {
  LiveServer server;
  CHECK(server.address() == "127.0.0.1:" + std::to_string(server.port()));
  CHECK(server.port() != 0);
  Client client(server.port());
  auto res = client.request(verb::get, "/v1/status");
  CHECK(res.result_int() == 200);
  CHECK(res[http::field::content_type] == "application/json");
  CHECK(res.body() == "{\"fake\":true}\n");
  CHECK(res.keep_alive());

  res = client.request(verb::post, "/v1/assign", R"({"lo": "1", "hi": 2000, "server": "hash4"})");
  CHECK(res.result_int() == 200);
  res = client.request(verb::post, "/v1/assign", R"({"lo": 5, "hi": 3, "server": "hash4"})");
  CHECK(res.result_int() == 400);
  CHECK(error_of(res) == "range 5-3: lo is greater than hi");
  CHECK(res.keep_alive());  // a 400 from the handler keeps the connection

  res = client.request(verb::put, "/v1/servers");
  CHECK(res.result_int() == 405);
  CHECK(res[http::field::allow] == "GET, POST");
  res = client.request(verb::get, "/nope");
  CHECK(res.result_int() == 404);
  CHECK(error_of(res) == "no such endpoint: /nope");
  res = client.request(verb::get, "/healthz");
  CHECK(res.body() == "{\"ok\":true}\n");

  server.stop();
  CHECK(server.backend.calls() == std::vector<std::string>{"status", "assign 1 2000 hash4"});
}

TEST_CASE("admin_http: server keeps the connection and answers pipelined requests in order") {
  LiveServer server;
  Client client(server.port());
  const std::string body = R"({"at": 5})";
  client.send(
      "GET /v1/table HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
      "POST /v1/split HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body +
      "GET /v1/history?limit=7 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  for (int i = 0; i < 3; ++i) CHECK(client.read().result_int() == 200);
  // And the connection is still good for more.
  CHECK(client.request(verb::get, "/v1/servers").result_int() == 200);
  server.stop();
  CHECK(server.backend.calls() ==
        std::vector<std::string>{"table", "split 5", "history 7", "servers"});
}

TEST_CASE("admin_http: server answers 413 to an oversized body, without reading it") {
  LiveServer server;
  Client client(server.port());
  client.send("POST /v1/assign HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000\r\n\r\n");
  auto res = client.read();
  CHECK(res.result_int() == 413);
  CHECK(error_of(res) == "the request body is larger than 1048576 bytes");
  CHECK(!res.keep_alive());
  CHECK(client.closed());

  // A chunked body that grows past the limit.
  Client chunked(server.port());
  chunked.send("POST /v1/assign HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string chunk(64 * 1024, 'x');
  boost::system::error_code ec;
  for (int i = 0; i < 20 && !ec; ++i) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    asio::write(chunked.socket, asio::buffer(std::string(size) + chunk + "\r\n"), ec);
  }
  CHECK(chunked.read().result_int() == 413);
  server.stop();
  CHECK(server.backend.calls().empty());
}

TEST_CASE("admin_http: server answers 100 Continue when asked") {
  LiveServer server;
  Client client(server.port());
  const std::string body = R"({"at": 9})";
  client.send(
      "POST /v1/split HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  auto interim = client.read();
  CHECK(interim.result_int() == 100);
  client.send(body);
  CHECK(client.read().result_int() == 200);
  server.stop();
  CHECK(server.backend.last() == "split 9");
}

TEST_CASE("admin_http: server answers malformed HTTP with 400 and closes") {
  LiveServer server;
  {
    Client client(server.port());
    client.send("HELLO WORLD\r\n\r\n");
    auto res = client.read();
    CHECK(res.result_int() == 400);
    CHECK(error_of(res).starts_with("malformed HTTP request: "));
    CHECK(client.closed());
  }
  {
    Client client(server.port());
    client.send("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n");
    CHECK(client.read().result_int() == 400);
    CHECK(client.closed());
  }
  {
    Client client(server.port());
    client.send("GET /v1/status HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n");
    auto res = client.read();
    CHECK(res.result_int() == 431);
    CHECK(error_of(res) == "the request header is larger than 8192 bytes");
    CHECK(client.closed());
  }
  {
    // HTTP/1.0 without keep-alive: one answer, then the server closes.
    Client client(server.port());
    client.send("GET /v1/table HTTP/1.0\r\n\r\n");
    auto res = client.read();
    CHECK(res.result_int() == 200);
    CHECK(res.version() == 10);
    CHECK(client.closed());
  }
  server.stop();
  CHECK(server.backend.calls() == std::vector<std::string>{"table"});
}

TEST_CASE("admin_http: server closes idle and slow connections") {
  AdminHttpLimits limits;
  limits.idle_timeout = std::chrono::milliseconds(50);
  limits.request_timeout = std::chrono::milliseconds(50);
  LiveServer server(limits);
  Client idle(server.port());
  CHECK(idle.closed());
  Client slow(server.port());
  slow.send("GET /v1/status HTTP/1.1\r\n");  // never finished
  CHECK(slow.closed());
  server.stop();
  CHECK(server.backend.calls().empty());
}

TEST_CASE("admin_http: server refuses connections beyond its limit with 503") {
  AdminHttpLimits limits;
  limits.max_connections = 2;
  LiveServer server(limits);
  Client a(server.port()), b(server.port());
  CHECK(a.request(verb::get, "/healthz").result_int() == 200);
  CHECK(b.request(verb::get, "/healthz").result_int() == 200);
  CHECK(server.connections() == 2);
  {
    Client c(server.port());
    c.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    auto res = c.read();
    CHECK(res.result_int() == 503);
    CHECK(error_of(res) == "too many connections: at most 2 at once; try again later");
    CHECK(c.closed());
  }
  a.socket.close();
  // The server notices the close when it next runs that session; retry until it has.
  CHECK(imhash::test::wait_until([&] {
    Client d(server.port());
    d.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    return d.read().result_int() == 200;
  }));
}

TEST_CASE("admin_http: stop closes open connections and lets the io_context finish") {
  LiveServer server;
  Client idle(server.port());
  Client busy(server.port());
  CHECK(busy.request(verb::get, "/v1/status").result_int() == 200);
  busy.send("GET /v1/stat");  // half a request
  CHECK(server.connections() == 2);
  server.stop();  // returns only when the io_context has no work left
  CHECK(idle.closed());
  CHECK(busy.closed());
  boost::system::error_code ec;
  tcp::socket late(idle.ctx);
  late.connect({asio::ip::make_address("127.0.0.1"), server.port()}, ec);
  CHECK(ec == asio::error::connection_refused);
}

TEST_CASE("admin_http: server reports a port in use") {
  LiveServer server;
  asio::io_context ctx;
  FakeBackend backend;
  CHECK_THROWS_AS(AdminHttpServer(ctx, backend, "127.0.0.1", server.port()),
                  boost::system::system_error);
  try {
    AdminHttpServer again(ctx, backend, "127.0.0.1", server.port());
  } catch (const boost::system::system_error& e) {
    CHECK(std::string(e.what()).starts_with("admin API: cannot listen on 127.0.0.1:"));
  }
  CHECK_THROWS_AS(AdminHttpServer(ctx, backend, "no.such.host.invalid", 0),
                  boost::system::system_error);
}

}  // namespace
}  // namespace imhash
