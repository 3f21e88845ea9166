// EtcdCluster (harness/etcd_cluster.h), the harness that runs a real etcd on loopback:
// its members come up healthy, serve keys through etcd's JSON gateway (/v3/kv/put, /v3/kv/range,
// keys and values in base64), keep serving with one member killed, and keep the data across
// restarts of one member and of all of them. The harness's own waits are bounded; a write that
// lands in a leader election is tried again (bounded), a read is never taken for what it returned
// until it answered.
#include "harness/etcd_cluster.h"

#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config_server/etcd_codec.h"
#include "harness/http_get.h"
#include "harness/wait_until.h"

using namespace imhash::test;
namespace json = boost::json;

namespace {

constexpr auto kRetryInterval = std::chrono::milliseconds(100);  // between tries of a request

std::string base64(std::string_view in) { return imhash::etcd_base64(in); }

std::string unbase64(std::string_view in) {
  std::string out;
  if (!imhash::etcd_unbase64(in, out))
    throw std::runtime_error("etcd sent text that is not base64");
  return out;
}

// The reply's JSON object if etcd answered 200 with one ({} otherwise).
json::object answer(const HttpReply& reply) {
  if (reply.status != 200) return {};
  boost::system::error_code ec;
  json::value v = json::parse(reply.body, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

// One put of key=value through member i's gateway; whether etcd acknowledged it.
bool put(EtcdCluster& c, size_t i, const std::string& key, const std::string& value) {
  const json::object request{{"key", base64(key)}, {"value", base64(value)}};
  const json::object reply =
      answer(http_post(c.client_address(i), "/v3/kv/put", json::serialize(request)));
  return reply.contains("header");
}

// Puts until one is acknowledged (a put can fall in an election); whether one was.
bool put_eventually(EtcdCluster& c, size_t i, const std::string& key, const std::string& value) {
  return wait_until([&] { return put(c, i, key, value); }, kPatience, kRetryInterval);
}

// The value of `key` read (linearizably) through member i: "" when there is no such key, nullopt
// when the member did not answer.
std::optional<std::string> get_once(EtcdCluster& c, size_t i, const std::string& key) {
  const json::object request{{"key", base64(key)}};
  const json::object reply =
      answer(http_post(c.client_address(i), "/v3/kv/range", json::serialize(request)));
  if (!reply.contains("header")) return std::nullopt;
  const json::value* kvs = reply.if_contains("kvs");
  if (kvs == nullptr || !kvs->is_array() || kvs->as_array().empty()) return "";
  const json::value* value = kvs->as_array().front().as_object().if_contains("value");
  return value == nullptr ? "" : unbase64(value->as_string());
}

// Reads until member i answers (bounded); its answer, or "<no answer>".
std::string get(EtcdCluster& c, size_t i, const std::string& key) {
  std::optional<std::string> value;
  wait_until([&] { return (value = get_once(c, i, key)).has_value(); }, kPatience, kRetryInterval);
  return value.value_or("<no answer>");
}

}  // namespace

TEST_CASE("etcd_cluster: a 3-member cluster starts and every member is healthy") {
  EtcdCluster c;
  REQUIRE(c.size() == 3);
  std::set<std::string> addresses;
  for (size_t i = 0; i < c.size(); ++i) {
    INFO("m", i, "'s log:\n", c.log_tail(i));
    CHECK(c.healthy(i));
    CHECK(c.client_address(i).rfind("127.0.0.1:", 0) == 0);
    CHECK_FALSE(c.log_tail(i).empty());
    addresses.insert(c.client_address(i));
  }
  CHECK(addresses.size() == 3);
  CHECK(c.endpoints() ==
        c.client_address(0) + "," + c.client_address(1) + "," + c.client_address(2));
}

TEST_CASE("etcd_cluster: a key written through one member is read back through the others") {
  EtcdCluster c;
  REQUIRE(put_eventually(c, 0, "/imhash/test/key", "value 1"));
  CHECK(get(c, 1, "/imhash/test/key") == "value 1");
  CHECK(get(c, 2, "/imhash/test/key") == "value 1");
  CHECK(get(c, 1, "/imhash/test/absent").empty());
}

TEST_CASE("etcd_cluster: with one member killed the other two still serve writes") {
  EtcdCluster c;
  c.kill(1);
  CHECK_FALSE(c.healthy(1));
  CHECK(http_get(c.client_address(1), "/health").status == 0);  // its port is closed: it is gone
  c.wait_quorum();
  INFO("m0's log:\n", c.log_tail(0), "\nm2's log:\n", c.log_tail(2));
  CHECK(put_eventually(c, 0, "/imhash/test/a", "through m0"));
  CHECK(put_eventually(c, 2, "/imhash/test/b", "through m2"));
  CHECK(get(c, 2, "/imhash/test/a") == "through m0");
  CHECK(get(c, 0, "/imhash/test/b") == "through m2");
}

TEST_CASE("etcd_cluster: a restarted member rejoins healthy and sees the keys") {
  EtcdCluster c;
  REQUIRE(put_eventually(c, 0, "/imhash/test/before", "written before the kill"));
  c.kill(1);
  REQUIRE(put_eventually(c, 2, "/imhash/test/during", "written while m1 was down"));
  c.restart(1);
  c.wait_healthy(1);
  INFO("m1's log:\n", c.log_tail(1));
  CHECK(get(c, 1, "/imhash/test/before") == "written before the kill");
  CHECK(get(c, 1, "/imhash/test/during") == "written while m1 was down");
  // A second restart of the same member, and it still serves writes of its own.
  c.kill(1);
  c.restart(1);
  c.wait_healthy(1);
  CHECK(put_eventually(c, 1, "/imhash/test/after", "through the restarted m1"));
  CHECK(get(c, 0, "/imhash/test/after") == "through the restarted m1");
}

TEST_CASE("etcd_cluster: kill_all and restart_all keep the data") {
  EtcdCluster c;
  REQUIRE(put_eventually(c, 0, "/imhash/test/kept", "across a restart of all"));
  c.kill_all();
  for (size_t i = 0; i < c.size(); ++i) {
    CHECK_FALSE(c.healthy(i));
    CHECK(http_get(c.client_address(i), "/health").status == 0);
  }
  c.restart_all();
  for (size_t i = 0; i < c.size(); ++i) c.wait_healthy(i);
  for (size_t i = 0; i < c.size(); ++i) {
    INFO("m", i, "'s log:\n", c.log_tail(i));
    CHECK(get(c, i, "/imhash/test/kept") == "across a restart of all");
  }
  CHECK(put_eventually(c, 2, "/imhash/test/kept", "written again"));
  CHECK(get(c, 0, "/imhash/test/kept") == "written again");
}
