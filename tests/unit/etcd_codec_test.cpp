// The etcd JSON gateway's replies as etcd 3.4 sends them (captured from a real member), read by
// config_server/etcd_codec.h; and the requests it builds.
#include "config_server/etcd_codec.h"

#include <doctest/doctest.h>

#include <boost/json.hpp>

using namespace imhash;
namespace json = boost::json;

namespace {

constexpr const char* kHeader =
    R"("header":{"cluster_id":"6328709751833505057","member_id":"11719934994822390420","revision":"3","raft_term":"2"})";

json::value reply(const std::string& rest) {
  return json::parse("{" + std::string(kHeader) + rest + "}");
}

}  // namespace

TEST_CASE("etcd codec: a range reply yields its keys, values and revisions") {
  EtcdReply r;
  read_range_reply(
      reply(
          R"(,"kvs":[{"key":"L2ltaGFzaC92ZXJzaW9u","create_revision":"2","mod_revision":"2","version":"1","value":"Mw=="}],"count":"1")"),
      r);
  REQUIRE(r.ok());
  CHECK(r.revision == 3);
  REQUIRE(r.ranges.size() == 1);
  REQUIRE(r.ranges[0].size() == 1);
  CHECK(r.ranges[0][0].key == "/imhash/version");
  CHECK(r.ranges[0][0].value == "3");
  CHECK(r.ranges[0][0].create_revision == 2);
  CHECK(r.ranges[0][0].mod_revision == 2);

  EtcdReply none;  // no key matched: no "kvs" at all
  read_range_reply(reply(""), none);
  REQUIRE(none.ok());
  REQUIRE(none.ranges.size() == 1);
  CHECK(none.ranges[0].empty());

  EtcdReply bad;
  read_range_reply(reply(R"(,"kvs":[{"key":"not base64!"}])"), bad);
  CHECK_FALSE(bad.ok());
  EtcdReply not_object;
  read_range_reply(json::parse("[1]"), not_object);
  CHECK_FALSE(not_object.ok());
}

TEST_CASE("etcd codec: a txn reply says whether the compares held and yields its ranges") {
  EtcdReply ok;
  read_txn_reply(
      reply(R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"}}}])"), ok);
  REQUIRE(ok.ok());
  CHECK(ok.succeeded);
  CHECK(ok.ranges.empty());

  EtcdReply failed;  // "succeeded" is left out when false; the failure branch's range came back
  read_txn_reply(
      reply(
          R"(,"responses":[{"response_range":{"header":{"revision":"3"},"kvs":[{"key":"L2ltaGFzaC92ZXJzaW9u","create_revision":"2","mod_revision":"3","version":"2","value":"NA=="}],"count":"1"}}])"),
      failed);
  REQUIRE(failed.ok());
  CHECK_FALSE(failed.succeeded);
  REQUIRE(failed.ranges.size() == 1);
  CHECK(failed.ranges[0].at(0).value == "4");
  CHECK(failed.ranges[0].at(0).mod_revision == 3);

  EtcdReply bad;
  read_txn_reply(reply(R"(,"responses":{"response_range":1})"), bad);
  CHECK_FALSE(bad.ok());
}

TEST_CASE("etcd codec: lease replies, and a keepalive of a lease that is gone has no TTL") {
  EtcdReply grant;
  read_grant_reply(reply(R"(,"ID":"7103480872084165642","TTL":"3")"), grant);
  REQUIRE(grant.ok());
  CHECK(grant.lease_id == 7103480872084165642);
  CHECK(grant.ttl_s == 3);

  EtcdReply alive, gone;
  read_keepalive_reply(json::parse(R"({"result":{)" + std::string(kHeader) +
                                   R"(,"ID":"7103480872084165642","TTL":"3"}})"),
                       alive);
  read_keepalive_reply(
      json::parse(R"({"result":{)" + std::string(kHeader) + R"(,"ID":"7103480872084165642"}})"),
      gone);
  REQUIRE(alive.ok());
  CHECK(alive.ttl_s == 3);
  REQUIRE(gone.ok());
  CHECK(gone.ttl_s == 0);

  CHECK(
      etcd_error_text(json::parse(
          R"({"error":"illegal base64 data at input byte 0","message":"illegal base64 data at input byte 0","code":3})")) ==
      "illegal base64 data at input byte 0");
}

TEST_CASE("etcd codec: a transaction request in the gateway's encoding") {
  const json::object t = etcd_txn_request({{"/v", EtcdCompare::Target::kMod, 7, {}}},
                                          {{EtcdOp::Kind::kPut, "/v", "8", 42, false}},
                                          {{EtcdOp::Kind::kRange, "/p/", {}, 0, true}});
  CHECK(json::serialize(t) ==
        R"({"compare":[{"key":"L3Y=","result":"EQUAL","target":"MOD","mod_revision":"7"}],)"
        R"("success":[{"request_put":{"key":"L3Y=","value":"OA==","lease":"42"}}],)"
        R"("failure":[{"request_range":{"key":"L3Av","range_end":"L3Aw"}}]})");
  std::string back;
  REQUIRE(etcd_unbase64(etcd_base64(std::string("\0\xff\x01", 3)), back));
  CHECK(back == std::string("\0\xff\x01", 3));
  CHECK_FALSE(etcd_unbase64("abc", back));
}
