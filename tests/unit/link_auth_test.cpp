// The cluster-key handshake: proofs (common/security/link_auth.h), its frames and messages, the
// config server's side (config_server/node_auth.h), and the listener rules that go with it.
#include "common/security/link_auth.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/codec/endpoint.h"
#include "common/codec/frame_protocol.h"
#include "common/routing/control_protocol.h"
#include "common/runtime/cluster_key.h"
#include "common/runtime/connection_quota.h"
#include "common/security/token.h"
#include "config_server/node_auth.h"

using namespace imhash;

namespace {

const std::vector<uint8_t> kKey(32, 0x5a);
const std::vector<uint8_t> kOtherKey(32, 0xa5);

link_auth::Transcript sample() {
  link_auth::Transcript t{
      .link = "hash", .client_role = "login", .client_name = "login1", .server_name = "hash1"};
  t.client_nonce.fill(1);
  t.server_nonce.fill(2);
  return t;
}

}  // namespace

TEST_CASE("link_auth: a proof checks only for its key, side, identities and nonces") {
  const auto t = sample();
  const auto proof = link_auth::prove(kKey, link_auth::Side::kClient, t);
  REQUIRE(proof);
  CHECK(link_auth::verify(kKey, link_auth::Side::kClient, t, *proof));
  CHECK_FALSE(link_auth::verify(kOtherKey, link_auth::Side::kClient, t, *proof));
  // The server's proof is not the client's: a reflected proof is worthless.
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kServer, t, *proof));
  auto changed = t;
  changed.client_name = "login2";  // relayed under another name
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, changed, *proof));
  changed = t;
  changed.client_role = "hash";
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, changed, *proof));
  changed = t;
  changed.server_name = "hash2";
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, changed, *proof));
  changed = t;
  changed.server_nonce[0] ^= 1;  // a replay into a new handshake
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, changed, *proof));
  changed = t;
  changed.link = "config";
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, changed, *proof));
  // Fails closed: a short proof, an all-zero proof, no key.
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, t,
                                std::span(proof->data(), proof->size() - 1)));
  const link_auth::Proof zeros{};
  CHECK_FALSE(link_auth::verify(kKey, link_auth::Side::kClient, t, zeros));
  CHECK_FALSE(link_auth::prove({}, link_auth::Side::kClient, t));
  CHECK_FALSE(link_auth::verify({}, link_auth::Side::kClient, t, zeros));
}

TEST_CASE("link_auth: nonces are fresh, and hex reads back") {
  const auto a = link_auth::make_nonce(), b = link_auth::make_nonce();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a != *b);
  CHECK(link_auth::from_hex<link_auth::kNonceSize>(to_hex(*a)) == a);
  CHECK_FALSE(link_auth::from_hex<link_auth::kNonceSize>("00"));
  CHECK_FALSE(link_auth::from_hex<link_auth::kNonceSize>(std::string(32, 'g')));
  const auto mixed_case =
      link_auth::from_hex<link_auth::kNonceSize>("DEADbeef" + std::string(24, '0'));
  REQUIRE(mixed_case);
  CHECK((*mixed_case)[0] == 0xde);
  CHECK((*mixed_case)[3] == 0xef);
}

TEST_CASE("frame protocol: the HELLO's role byte is 1 for a login server, 2 for a hash server") {
  using namespace frame;
  const std::string nonce(16, 'n');
  for (const auto& [role, byte] : {std::pair{Role::kLogin, 1}, std::pair{Role::kHash, 2}}) {
    const Request hello{.type = FrameType::kHello,
                        .flags = kFlagAuth,
                        .protocol_version = kProtocolVersion,
                        .name = "n1",
                        .role = role,
                        .auth = nonce};
    std::vector<uint8_t> out;
    append_request(hello, out);
    REQUIRE(out.size() > nonce.size());
    CHECK(out[out.size() - nonce.size() - 1] == byte);  // the body ends: role, client nonce
  }
}

TEST_CASE("frame protocol: the handshake's HELLO, its answer and AUTH round-trip") {
  using namespace frame;
  const std::string nonce(16, 'n');
  Request hello{.type = FrameType::kHello,
                .flags = kFlagAuth,
                .correlation = 3,
                .protocol_version = kProtocolVersion,
                .shard = 1,
                .name = "login1",
                .role = Role::kHash,
                .auth = nonce};
  const std::string proof(32, 'p');
  const Request auth{.type = FrameType::kAuth, .correlation = 4, .auth = proof};
  std::vector<uint8_t> out;
  append_request(hello, out);
  append_request(auth, out);
  std::span<const uint8_t> in(out);
  for (const Request& want : {hello, auth}) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    REQUIRE(next_frame(in, h, body, used) == DecodeStatus::kOk);
    Request got;
    REQUIRE(decode_request(h, body, got) == DecodeStatus::kOk);
    CHECK(got == want);
    in = in.subspan(used);
  }
  const std::string answer(kHelloAuthResponseSize, 'a');
  const Response ok{.type = FrameType::kHello,
                    .flags = kFlagAuth,
                    .correlation = 3,
                    .protocol_version = kProtocolVersion,
                    .shard_count = 2,
                    .name = "hash1",
                    .auth = answer};
  const Response refused{.type = FrameType::kAuth, .status = FrameStatus::kUnauthorized};
  out.clear();
  append_response(ok, out);
  append_response(refused, out);
  in = out;
  for (const Response& want : {ok, refused}) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    REQUIRE(next_frame(in, h, body, used) == DecodeStatus::kOk);
    Response got;
    REQUIRE(decode_response(h, body, got) == DecodeStatus::kOk);
    CHECK(got == want);
    in = in.subspan(used);
  }
  // A HELLO that announces the handshake but carries a short nonce, or an unknown role, is bad.
  Request short_nonce = hello;
  short_nonce.auth = std::string_view(nonce).substr(0, 15);
  out.clear();
  append_request(short_nonce, out);
  Header h;
  std::span<const uint8_t> body;
  size_t used = 0;
  REQUIRE(next_frame(out, h, body, used) == DecodeStatus::kOk);
  Request got;
  CHECK(decode_request(h, body, got) == DecodeStatus::kBadBody);
  Request bad_role = hello;
  bad_role.role = static_cast<Role>(9);
  out.clear();
  append_request(bad_role, out);
  REQUIRE(next_frame(out, h, body, used) == DecodeStatus::kOk);
  CHECK(decode_request(h, body, got) == DecodeStatus::kBadBody);
}

TEST_CASE("control protocol: the handshake's messages round-trip") {
  const std::vector<control::Message> messages = {
      control::AuthHello{Role::kLogin, "login1", std::string(32, 'a')},
      control::AuthChallenge{std::string(32, 'b'), std::string(64, 'c')},
      control::AuthProof{std::string(64, 'd')}};
  for (const auto& m : messages) {
    std::vector<uint8_t> out;
    control::append_message(m, out);
    control::Message got;
    size_t used = 0;
    std::string error;
    REQUIRE(control::next_message(out, got, used, error) == control::DecodeStatus::kOk);
    CHECK(got == m);
    CHECK(used == out.size());
  }
}

namespace {

// The node's half of the config-link handshake, as common/links/config_link.cpp does it.
struct NodeSide {
  link_auth::Transcript t{
      .link = "config", .client_role = "hash", .client_name = "hash1", .server_name = "config"};
  std::vector<uint8_t> key;
  explicit NodeSide(std::vector<uint8_t> k) : key(std::move(k)) {
    t.client_nonce = link_auth::make_nonce().value();
  }
  control::AuthHello hello() const {
    return control::AuthHello{Role::kHash, "hash1", to_hex(t.client_nonce)};
  }
  // Checks the challenge; the proof to send, or nullopt if the server did not prove the key.
  std::optional<control::AuthProof> answer(const control::AuthChallenge& c) {
    t.server_nonce = link_auth::from_hex<link_auth::kNonceSize>(c.nonce).value();
    const auto proof = link_auth::from_hex<link_auth::kProofSize>(c.proof).value();
    if (!link_auth::verify(key, link_auth::Side::kServer, t, proof)) return std::nullopt;
    return control::AuthProof{to_hex(link_auth::prove(key, link_auth::Side::kClient, t).value())};
  }
};

control::Register hash1() {
  return control::Register{.role = Role::kHash, .name = "hash1", .address = "a:1"};
}

}  // namespace

TEST_CASE(
    "node auth: the config server takes a node only after it proved the key, under the "
    "name it proved") {
  std::optional<control::Message> reply;
  std::string why;
  SUBCASE("the whole handshake, then the registration") {
    NodeAuth auth(kKey);
    NodeSide node(kKey);
    REQUIRE(auth.on_message(node.hello(), reply, why) == NodeAuth::Verdict::kReply);
    REQUIRE(reply);
    const auto proof = node.answer(std::get<control::AuthChallenge>(*reply));
    REQUIRE(proof);
    CHECK(auth.on_message(*proof, reply, why) == NodeAuth::Verdict::kReply);
    CHECK_FALSE(reply);
    CHECK(auth.on_message(hash1(), reply, why) == NodeAuth::Verdict::kPass);
    CHECK(auth.on_message(control::Heartbeat{}, reply, why) == NodeAuth::Verdict::kPass);
    // Registering under another name than the one proved, or a second handshake: refused.
    control::Register other = hash1();
    other.name = "hash2";
    CHECK(auth.on_message(other, reply, why) == NodeAuth::Verdict::kRefuse);
    CHECK(why.find("after proving") != std::string::npos);
    CHECK(auth.on_message(node.hello(), reply, why) == NodeAuth::Verdict::kRefuse);
  }
  SUBCASE("a registration without the handshake") {
    NodeAuth auth(kKey);
    CHECK(auth.on_message(hash1(), reply, why) == NodeAuth::Verdict::kRefuse);
    CHECK(why.find("cluster key") != std::string::npos);
  }
  SUBCASE("a node with another key: it refuses our proof, and its own is refused") {
    NodeAuth auth(kKey);
    NodeSide node(kOtherKey);
    REQUIRE(auth.on_message(node.hello(), reply, why) == NodeAuth::Verdict::kReply);
    CHECK_FALSE(node.answer(std::get<control::AuthChallenge>(*reply)));
    // Were it to send a proof under its key anyway:
    const auto forged = control::AuthProof{
        to_hex(link_auth::prove(kOtherKey, link_auth::Side::kClient, node.t).value())};
    CHECK(auth.on_message(forged, reply, why) == NodeAuth::Verdict::kRefuse);
  }
  SUBCASE("a proof replayed from another handshake") {
    NodeAuth first(kKey), second(kKey);
    NodeSide node(kKey);
    REQUIRE(first.on_message(node.hello(), reply, why) == NodeAuth::Verdict::kReply);
    const auto proof = node.answer(std::get<control::AuthChallenge>(*reply));
    REQUIRE(proof);
    REQUIRE(second.on_message(node.hello(), reply, why) == NodeAuth::Verdict::kReply);
    CHECK(second.on_message(*proof, reply, why) == NodeAuth::Verdict::kRefuse);
  }
  SUBCASE("without a key the config server passes plain registrations and refuses a handshake") {
    NodeAuth auth({});
    CHECK(auth.on_message(hash1(), reply, why) == NodeAuth::Verdict::kPass);
    CHECK(auth.on_message(NodeSide(kKey).hello(), reply, why) == NodeAuth::Verdict::kRefuse);
  }
}

TEST_CASE("safe by default: loopback hosts, and the listener rule") {
  for (const char* h :
       {"127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"}) {
    CAPTURE(h);
    CHECK(is_loopback_host(h));
  }
  for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "example.com", "", "[::2]"}) {
    CAPTURE(h);
    CHECK_FALSE(is_loopback_host(h));
  }
  ClusterKey none;
  CHECK_NOTHROW(none.check_listener("127.0.0.1", "--listen"));
  CHECK_THROWS_AS(none.check_listener("0.0.0.0", "--listen"), UsageError);
  ClusterKey insecure{.insecure = true};
  CHECK_NOTHROW(insecure.check_listener("0.0.0.0", "--listen"));
  ClusterKey keyed{.key = kKey};
  CHECK_NOTHROW(keyed.check_listener("10.0.0.1", "--listen"));
  CHECK_THROWS_AS(check_internal_listener("10.0.0.1", "--admin", false, false, "TOKEN"),
                  UsageError);
  CHECK_NOTHROW(check_internal_listener("10.0.0.1", "--admin", true, false, "TOKEN"));
}

TEST_CASE("connection quota: total and per-source caps, released with the ticket") {
  ConnectionQuota quota({.total = 3, .per_source = 2});
  const auto a = boost::asio::ip::make_address("10.0.0.1");
  const auto a_mapped = boost::asio::ip::make_address("::ffff:10.0.0.1");
  const auto b = boost::asio::ip::make_address("10.0.0.2");
  ConnectionQuota::Refusal why{};
  auto t1 = quota.admit(a, why);
  auto t2 = quota.admit(a_mapped, why);  // the same host
  REQUIRE(t1);
  REQUIRE(t2);
  CHECK_FALSE(quota.admit(a, why));
  CHECK(why == ConnectionQuota::Refusal::kPerSource);
  auto t3 = quota.admit(b, why);
  REQUIRE(t3);
  CHECK_FALSE(quota.admit(b, why));
  CHECK(why == ConnectionQuota::Refusal::kTotal);
  CHECK(quota.open() == 3);
  t1.reset();
  CHECK(quota.open() == 2);
  CHECK(quota.admit(a, why));  // the ticket goes at once: open() is back to 2
  CHECK(quota.open() == 2);
}
