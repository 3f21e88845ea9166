// Authentication tokens (common/security/token.h) and the login server's auth decision
// (plan_request with an AuthPolicy). Golden MACs were computed independently with
//   printf '000000000000002a6553f100' | xxd -r -p |
//     openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f
#include <doctest/doctest.h>

#include <vector>

#include "common/runtime/key_file.h"
#include "common/security/token.h"
#include "imctl/imctl_command.h"
#include "login_server/request_plan.h"

using namespace imhash;
using client::Op;
using client::Status;

namespace {

std::vector<uint8_t> key_00_1f() {
  std::vector<uint8_t> k(32);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i);
  return k;
}

std::vector<uint8_t> request(Op op, uint64_t user, std::optional<client::Token> token) {
  client::Message m;
  m.op = op;
  m.request_id = 5;
  m.user_id = user;
  m.token = token;
  std::vector<uint8_t> out(256);
  out.resize(client::encode_request(m, out));
  REQUIRE(!out.empty());
  return out;
}

struct Planned {
  Plan plan;
  std::vector<uint8_t> reply;
};

Planned plan(const std::vector<uint8_t>& datagram, const AuthPolicy* auth) {
  Planned p;
  p.reply.resize(client::kMinDatagram);
  p.plan = plan_request(datagram, Endpoint::v4(0x7f000001, 1000), 3, p.reply, auth);
  p.reply.resize(p.plan.reply_size);
  return p;
}

constexpr uint32_t kNow = 1'700'000'000;

}  // namespace

TEST_CASE("token: golden HMAC-SHA256 values") {
  const auto key = key_00_1f();
  const client::Token t = make_token(key, 42, 0x6553f100);
  CHECK(t.user_id == 42u);
  CHECK(t.expiry == 0x6553f100u);
  CHECK(to_hex(t.mac) == "08c224fbeec79c84e79a6e2a61f2bfe0");
  CHECK(to_hex(token_bytes(t)) ==
        "000000000000002a6553f100"
        "08c224fbeec79c84e79a6e2a61f2bfe0");

  std::string error;
  const auto key2 = parse_hex_key("0123456789abcdef 0123456789ABCDEF\n", error);
  REQUIRE(key2);
  const client::Token t2 = make_token(*key2, UINT64_MAX, UINT32_MAX);
  CHECK(to_hex(t2.mac) == "c7d1031ab4929625467c44a6219fc468");
}

TEST_CASE("token: a TokenMac reused for many MACs gives the golden values every time") {
  TokenMac mac(key_00_1f());
  std::string error;
  const auto key2 = parse_hex_key("0123456789abcdef0123456789abcdef", error);
  REQUIRE(key2);
  TokenMac mac2(*key2);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    CHECK(to_hex(*mac(42, 0x6553f100)) == "08c224fbeec79c84e79a6e2a61f2bfe0");
    CHECK(to_hex(*mac2(UINT64_MAX, UINT32_MAX)) == "c7d1031ab4929625467c44a6219fc468");
  }
  // Interleaved with other messages, each MAC is that of its own message.
  for (uint64_t id = 1; id <= 300; ++id) {
    REQUIRE(*mac(id, kNow) == token_mac(key_00_1f(), id, kNow));
  }
  CHECK(verify_token(mac, make_token(key_00_1f(), 7, kNow + 1), 7, kNow) == TokenCheck::kOk);
  CHECK(verify_token(mac2, make_token(key_00_1f(), 7, kNow + 1), 7, kNow) == TokenCheck::kBadMac);
  CHECK(verify_token(mac, std::nullopt, 7, kNow) == TokenCheck::kMissing);
  // An empty key is a key too (HMAC pads it), not "keep the previous one" (golden value from
  // Python's hmac module).
  TokenMac empty(std::span<const uint8_t>{});
  CHECK(to_hex(*empty(1, 2)) == "5772028cce08a6065d849fcd3924d2d3");
  CHECK(to_hex(token_mac({}, 1, 2)) == "5772028cce08a6065d849fcd3924d2d3");
}

TEST_CASE("token: a MAC that could not be computed matches no token, not even an all-zero one") {
  client::Token zero;  // user 0, expiry 0, MAC all zero bytes
  CHECK_FALSE(token_mac_matches(std::nullopt, zero));
  CHECK(token_mac_matches(std::array<uint8_t, 16>{}, zero));  // the comparison itself
  const client::Token t = make_token(key_00_1f(), 9, kNow + 60);
  CHECK_FALSE(token_mac_matches(std::nullopt, t));
  CHECK(token_mac_matches(token_mac(key_00_1f(), 9, kNow + 60), t));
}

TEST_CASE("key file: a key other users can reach, or its group can change, is refused") {
  CHECK(key_file_mode_problem(0100600).empty());
  CHECK(key_file_mode_problem(0100400).empty());
  CHECK(key_file_mode_problem(0100640).empty());
  CHECK(key_file_mode_problem(0100440).empty());
  CHECK(key_file_mode_problem(0100644) == "is accessible by other users");
  CHECK(key_file_mode_problem(0100602) == "is accessible by other users");
  CHECK(key_file_mode_problem(0100660) == "is writable by its group");
}

TEST_CASE("token: verify_token accepts a valid token and names each failure") {
  const auto key = key_00_1f();
  const client::Token t = make_token(key, 42, kNow + 60);
  CHECK(verify_token(key, t, 42, kNow) == TokenCheck::kOk);
  CHECK(verify_token(key, t, 42, kNow + 59) == TokenCheck::kOk);
  CHECK(verify_token(key, t, 42, kNow + 60) == TokenCheck::kExpired);
  CHECK(verify_token(key, t, 43, kNow) == TokenCheck::kWrongUser);
  CHECK(verify_token(key, std::optional<client::Token>{}, 42, kNow) == TokenCheck::kMissing);
  CHECK(verify_token(key, std::optional<client::Token>{t}, 42, kNow) == TokenCheck::kOk);

  for (size_t i = 0; i < t.mac.size(); ++i) {
    client::Token bad = t;
    bad.mac[i] ^= 0x01;
    CHECK(verify_token(key, bad, 42, kNow) == TokenCheck::kBadMac);
  }
  client::Token later = t;
  later.expiry += 3600;  // extending the expiry breaks the MAC
  CHECK(verify_token(key, later, 42, kNow) == TokenCheck::kBadMac);

  auto other_key = key;
  other_key[0] ^= 0xff;
  CHECK(verify_token(other_key, t, 42, kNow) == TokenCheck::kBadMac);
  CHECK(std::string(to_string(TokenCheck::kBadMac)) == "bad_mac");
}

TEST_CASE("token: parse_hex_key") {
  std::string error;
  auto k = parse_hex_key("000102030405060708090a0b0c0d0e0f", error);
  REQUIRE(k);
  CHECK(k->size() == 16u);
  CHECK((*k)[15] == 0x0f);

  CHECK(parse_hex_key(" 00010203 04050607\t08090a0b0c0d0e0f\r\n", error));

  error.clear();
  CHECK_FALSE(parse_hex_key("", error));
  CHECK(error.find("too short") != std::string::npos);
  error.clear();
  CHECK_FALSE(parse_hex_key("000102030405060708090a0b0c0d0e", error));  // 15 bytes
  CHECK(error.find("too short") != std::string::npos);
  error.clear();
  CHECK_FALSE(parse_hex_key("000102030405060708090a0b0c0d0e0f0", error));
  CHECK(error.find("odd") != std::string::npos);
  error.clear();
  CHECK_FALSE(parse_hex_key("000102030405060708090a0b0c0d0e0g", error));
  CHECK(error.find("hex") != std::string::npos);
  error.clear();
  CHECK_FALSE(parse_hex_key(std::string(2 * kMaxAuthKeyBytes + 2, 'a'), error));
  CHECK(error.find("too long") != std::string::npos);
}

TEST_CASE("auth: LOGIN, HEARTBEAT and LOGOUT need a valid token for their user") {
  const auto key = key_00_1f();
  TokenMac mac(key);
  const AuthPolicy auth{.mac = &mac, .now = kNow};
  const client::Token good = make_token(key, 42, kNow + 3600);
  for (Op op : {Op::kLogin, Op::kHeartbeat, Op::kLogout}) {
    CAPTURE(client::to_string(op));
    auto ok = plan(request(op, 42, good), &auth);
    CHECK(ok.plan.kind == Plan::kForward);
    CHECK(ok.plan.ask.user_id == 42u);

    struct Case {
      std::optional<client::Token> token;
      TokenCheck why;
    };
    client::Token forged = good;
    forged.mac[3] ^= 0x80;
    const Case cases[] = {
        {std::nullopt, TokenCheck::kMissing},
        {make_token(key, 43, kNow + 3600), TokenCheck::kWrongUser},
        {make_token(key, 42, kNow), TokenCheck::kExpired},
        {make_token(key, 42, kNow - 10), TokenCheck::kExpired},
        {forged, TokenCheck::kBadMac},
    };
    for (const Case& c : cases) {
      const auto datagram = request(op, 42, c.token);
      auto p = plan(datagram, &auth);
      CHECK(p.plan.kind == Plan::kReply);
      CHECK(p.plan.status == Status::kUnauthorized);
      CHECK(p.plan.auth == c.why);
      REQUIRE(p.reply.size() == client::kHeaderSize);
      CHECK(p.reply.size() <= datagram.size());
      auto d = client::decode_response(p.reply);
      REQUIRE(d.error == client::DecodeError::kOk);
      CHECK(d.msg.op == op);
      CHECK(d.msg.request_id == 5u);
      CHECK(d.msg.user_id == 42u);
      CHECK(d.msg.status == Status::kUnauthorized);
    }
  }
}

TEST_CASE("auth: LOOKUP and PING need no token, and auth off needs none at all") {
  const auto key = key_00_1f();
  TokenMac mac(key);
  const AuthPolicy auth{.mac = &mac, .now = kNow};
  CHECK(plan(request(Op::kLookup, 42, std::nullopt), &auth).plan.kind == Plan::kForward);
  auto ping = plan(request(Op::kPing, 0, std::nullopt), &auth);
  CHECK(ping.plan.kind == Plan::kReply);
  CHECK(ping.plan.status == Status::kOk);
  for (Op op : {Op::kLogin, Op::kHeartbeat, Op::kLogout}) {
    CHECK(plan(request(op, 42, std::nullopt), nullptr).plan.kind == Plan::kForward);
  }
  // A malformed request is still BAD_REQUEST, not UNAUTHORIZED.
  auto bad = request(Op::kLogin, 42, std::nullopt);
  bad[18] = 0xff;  // body_len disagrees with the length
  CHECK(plan(bad, &auth).plan.status == Status::kBadRequest);
}

TEST_CASE("rate_limited plan: header only, never larger than the request") {
  auto datagram = request(Op::kLogin, 42, std::nullopt);
  std::vector<uint8_t> reply(client::kMinDatagram);
  Plan p = plan_rate_limited(datagram, reply);
  CHECK(p.kind == Plan::kReply);
  CHECK(p.status == Status::kRateLimited);
  REQUIRE(p.reply_size == client::kHeaderSize);
  auto d = client::decode_response(std::span<const uint8_t>(reply).first(p.reply_size));
  REQUIRE(d.error == client::DecodeError::kOk);
  CHECK(d.msg.op == Op::kLogin);
  CHECK(d.msg.request_id == 5u);
  CHECK(d.msg.user_id == 42u);
  CHECK(d.msg.status == Status::kRateLimited);

  for (size_t len = 0; len < client::kMinDatagram; ++len) {
    Plan s = plan_rate_limited(std::span<const uint8_t>(datagram).first(len), reply);
    CHECK(s.kind == Plan::kDrop);
    CHECK(s.drop == DropReason::kTooShort);
  }
  datagram[1] = 'X';
  CHECK(plan_rate_limited(datagram, reply).drop == DropReason::kBadMagic);
}

TEST_CASE("imctl token: arguments and output") {
  auto p =
      parse_imctl_args({"token", "42", "--ttl", "1h", "--key-file", "k.hex", "--json"}, nullptr);
  INFO(p.error);
  REQUIRE(p.invocation);
  CHECK(p.invocation->command == ImctlCommand::kToken);
  CHECK(p.invocation->token_user == 42u);
  CHECK(p.invocation->token_ttl_s == 3600u);
  CHECK(p.invocation->key_file == "k.hex");
  CHECK(p.invocation->json);

  auto error_of = [](std::vector<std::string> args) {
    auto q = parse_imctl_args(args, nullptr);
    CHECK_FALSE(q.invocation);
    return q.error;
  };
  CHECK(error_of({"token", "42", "--key-file", "k"}).find("--ttl") != std::string::npos);
  CHECK(error_of({"token", "42", "--ttl", "60"}).find("--key-file") != std::string::npos);
  CHECK(error_of({"token", "x", "--ttl", "60", "--key-file", "k"}).find("not an id") !=
        std::string::npos);
  CHECK(error_of({"token", "42", "--ttl", "0", "--key-file", "k"}).find("AGE") !=
        std::string::npos);
  CHECK(error_of({"token", "--ttl", "60", "--key-file", "k"}).find("expected") !=
        std::string::npos);
  CHECK(imctl_usage().find("token ID --ttl AGE") != std::string::npos);

  const client::Token t = make_token(key_00_1f(), 42, 0x6553f100);
  CHECK(format_token(t, false) == "000000000000002a6553f10008c224fbeec79c84e79a6e2a61f2bfe0\n");
  CHECK(format_token(t, true) ==
        "{\"user_id\":42,\"expiry\":1700000000,\"token\":"
        "\"000000000000002a6553f10008c224fbeec79c84e79a6e2a61f2bfe0\"}\n");
}
