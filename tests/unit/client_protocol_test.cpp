// Tests for the client protocol codec (common/codec/client_protocol.h, docs/design.md §1): golden
// bytes, round trips of every op, every truncation length, and each decode error.
#include "common/codec/client_protocol.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace imhash::client {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes enc_request(const Message& m, size_t pad_to = kMinDatagram) {
  Bytes out(kMaxDatagram + 1);
  const size_t n = encode_request(m, out, pad_to);
  REQUIRE(n > 0);
  out.resize(n);
  return out;
}

Bytes enc_response(const Message& m) {
  Bytes out(kMaxDatagram);
  const size_t n = encode_response(m, out);
  REQUIRE(n > 0);
  out.resize(n);
  return out;
}

// A raw datagram: header fields as given, body_len = body size unless overridden.
struct Raw {
  uint8_t magic0 = 0x49, magic1 = 0x48, version = 1, op_byte = 1;
  uint32_t request_id = 0x0a0b0c0d;
  uint64_t user_id = 77;
  uint8_t status = 0, flags = 0;
  std::optional<uint16_t> body_len;
  Bytes body;
  // Requests are padded to 48 with a trailing PAD unless pad is false.
  bool pad = true;

  Bytes build() const {
    Bytes b = body;
    if (pad && kHeaderSize + b.size() < kMinDatagram) {
      const size_t n = kMinDatagram - kHeaderSize - b.size();
      b.push_back(0);
      b.push_back(static_cast<uint8_t>(n >= 2 ? n - 2 : 0));
      b.resize(b.size() + (n >= 2 ? n - 2 : 0), 0xee);
    }
    const uint16_t len = body_len.value_or(static_cast<uint16_t>(b.size()));
    Bytes out = {magic0,
                 magic1,
                 version,
                 op_byte,
                 static_cast<uint8_t>(request_id >> 24),
                 static_cast<uint8_t>(request_id >> 16),
                 static_cast<uint8_t>(request_id >> 8),
                 static_cast<uint8_t>(request_id)};
    for (int shift = 56; shift >= 0; shift -= 8)
      out.push_back(static_cast<uint8_t>(user_id >> shift));
    out.push_back(status);
    out.push_back(flags);
    out.push_back(static_cast<uint8_t>(len >> 8));
    out.push_back(static_cast<uint8_t>(len));
    out.insert(out.end(), b.begin(), b.end());
    return out;
  }
};

Endpoint v4_endpoint() { return Endpoint::v4(0xc0000201, 5222); }  // 192.0.2.1:5222
Endpoint v6_endpoint() {
  return Endpoint::v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 443);
}
Token sample_token() {
  Token t;
  t.user_id = 0x1122334455667788;
  t.expiry = 0x65000000;
  for (uint8_t i = 0; i < 16; ++i) t.mac[i] = static_cast<uint8_t>(0xa0 + i);
  return t;
}

// Decodes a copy of bytes[0, len) held in an exact-size heap buffer, so ASan sees any overread.
Decoded decode_exact(const Bytes& bytes, size_t len, bool response) {
  Bytes copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
  return response ? decode_response(copy) : decode_request(copy);
}

constexpr Op kAllOps[] = {Op::kLogin, Op::kHeartbeat, Op::kLookup, Op::kLogout, Op::kPing};

}  // namespace

TEST_CASE("client_protocol: golden LOGIN request with IPv4 endpoint padded to 48") {
  Message m;
  m.op = Op::kLogin;
  m.request_id = 0x01020304;
  m.user_id = 0x1122334455667788;
  m.endpoint = v4_endpoint();
  const Bytes expected = {
      0x49, 0x48, 0x01, 0x01, 0x01, 0x02, 0x03, 0x04,        // magic, version, op, id
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,        // user_id
      0x00, 0x00, 0x00, 0x1c,                                // status, flags, body_len 28
      0x01, 0x07, 0x04, 0x14, 0x66, 0xc0, 0x00, 0x02, 0x01,  // ENDPOINT 192.0.2.1:5222
      0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // PAD, 17 zero bytes
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  };
  const Bytes got = enc_request(m);
  CHECK(got.size() == kMinDatagram);
  CHECK(got == expected);

  const Decoded d = decode_request(expected);
  REQUIRE(d.error == DecodeError::kOk);
  CHECK(d.msg == m);
  CHECK(d.header.body_len == 28);
}

TEST_CASE("client_protocol: golden LOOKUP OK response with IPv6 endpoint and AGE") {
  Message m;
  m.op = Op::kLookup;
  m.response = true;
  m.request_id = 0xdeadbeef;
  m.user_id = 42;
  m.endpoint = v6_endpoint();
  m.age = 90;
  const Bytes expected = {
      0x49, 0x48, 0x01, 0x83, 0xde, 0xad, 0xbe, 0xef,  // magic, version, op LOOKUP|0x80, id
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a,  // user_id 42
      0x00, 0x00, 0x00, 0x1b,                          // OK, flags 0, body_len 27
      0x01, 0x13, 0x06, 0x01, 0xbb,                    // ENDPOINT len 19, family 6, port 443
      0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,  // 2001:db8::1
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,  //
      0x02, 0x04, 0x00, 0x00, 0x00, 0x5a,              // AGE 90
  };
  const Bytes got = enc_response(m);
  CHECK(got.size() == 47);  // the largest version-1 answer still fits in a 48-byte request
  CHECK(got == expected);

  const Decoded d = decode_response(expected);
  REQUIRE(d.error == DecodeError::kOk);
  CHECK(d.msg == m);
  CHECK(has_required_tlvs(d.msg));
}

TEST_CASE("client_protocol: golden PING response with TABLE_VERSION") {
  Message m;
  m.op = Op::kPing;
  m.response = true;
  m.request_id = 7;
  m.table_version = 0x0102030405060708;
  const Bytes expected = {
      0x49, 0x48, 0x01, 0x85, 0x00, 0x00, 0x00, 0x07,  // magic, version, op PING|0x80, id 7
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // user_id 0
      0x00, 0x00, 0x00, 0x0a,                          // OK, flags 0, body_len 10
      0x04, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // TABLE_VERSION
  };
  CHECK(enc_response(m) == expected);
  const Decoded d = decode_response(expected);
  REQUIRE(d.error == DecodeError::kOk);
  CHECK(d.msg == m);
}

TEST_CASE("client_protocol: golden error reply") {
  // A LOOKUP request from a future version 9: the reply says version 1, UNSUPPORTED_VERSION.
  Raw raw;
  raw.version = 9;
  raw.op_byte = 3;
  raw.request_id = 0xcafebabe;
  raw.user_id = 5;
  const Decoded d = decode_request(raw.build());
  REQUIRE(d.error == DecodeError::kBadVersion);
  REQUIRE(d.header_valid);
  REQUIRE(error_reply_status(d.error) == Status::kUnsupportedVersion);

  Bytes out(64, 0xff);
  const size_t n = encode_error_reply(d.header, Status::kUnsupportedVersion, out);
  REQUIRE(n == kHeaderSize);
  out.resize(n);
  const Bytes expected = {
      0x49, 0x48, 0x01, 0x83, 0xca, 0xfe, 0xba, 0xbe,  // version 1, op LOOKUP|0x80, id echoed
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,  // user_id echoed
      0x07, 0x00, 0x00, 0x00,                          // UNSUPPORTED_VERSION, flags 0, body_len 0
  };
  CHECK(out == expected);

  const Decoded r = decode_response(out);
  REQUIRE(r.error == DecodeError::kOk);
  CHECK(r.msg.status == Status::kUnsupportedVersion);
  CHECK(r.msg.op == Op::kLookup);
  CHECK(r.msg.request_id == 0xcafebabe);
  CHECK(has_required_tlvs(r.msg));  // nothing is promised for an error
}

TEST_CASE("client_protocol: round trip of every op, request and response, every TLV subset") {
  for (Op op : kAllOps) {
    for (unsigned mask = 0; mask < 16; ++mask) {
      for (bool v6 : {false, true}) {
        if (!(mask & 1) && v6) continue;
        Message m;
        m.op = op;
        m.request_id = 1000 + mask;
        m.user_id = op == Op::kPing ? 0 : 0xfedcba9876543210;
        if (mask & 1) m.endpoint = v6 ? v6_endpoint() : v4_endpoint();
        if (mask & 2) m.age = 0xffffffff;
        if (mask & 4) m.token = sample_token();
        if (mask & 8) m.table_version = 0x8000000000000001;
        CAPTURE(to_string(op));
        CAPTURE(mask);
        CAPTURE(v6);

        m.response = false;
        const Bytes req = enc_request(m);
        CHECK(req.size() >= kMinDatagram);
        const Decoded dq = decode_request(req);
        REQUIRE(dq.error == DecodeError::kOk);
        CHECK(dq.msg == m);
        CHECK(decode_response(req).error == DecodeError::kBadOp);

        for (Status s : {Status::kOk, Status::kNotFound, Status::kUnsupportedVersion}) {
          m.response = true;
          m.status = s;
          m.user_id = 0xfedcba9876543210;  // responses may carry any user_id, even for PING
          const Bytes resp = enc_response(m);
          const Decoded dr = decode_response(resp);
          REQUIRE(dr.error == DecodeError::kOk);
          CHECK(dr.msg == m);
          CHECK(decode_request(resp).error != DecodeError::kOk);
        }
      }
    }
  }
}

TEST_CASE("client_protocol: every version-1 OK answer fits in 48 bytes") {
  for (Op op : kAllOps) {
    Message m;
    m.op = op;
    m.response = true;
    if (op == Op::kLogin || op == Op::kHeartbeat || op == Op::kLookup) m.endpoint = v6_endpoint();
    if (op == Op::kLookup) m.age = 1;
    if (op == Op::kPing) m.table_version = 1;
    CHECK(has_required_tlvs(m));
    CHECK(enc_response(m).size() <= kMinDatagram);
  }
}

TEST_CASE("client_protocol: every truncation of a valid datagram fails to decode") {
  Message login;
  login.op = Op::kLogin;
  login.user_id = 9;
  login.endpoint = v6_endpoint();
  login.token = sample_token();
  Message lookup_ok;
  lookup_ok.op = Op::kLookup;
  lookup_ok.response = true;
  lookup_ok.endpoint = v6_endpoint();
  lookup_ok.age = 3;
  Message ping;
  ping.op = Op::kPing;

  const std::vector<std::pair<Bytes, bool>> valid = {
      {enc_request(login), false},
      {enc_request(ping), false},
      {enc_request(ping, 300), false},
      {enc_response(lookup_ok), true},
  };
  for (const auto& [bytes, response] : valid) {
    REQUIRE(decode_exact(bytes, bytes.size(), response).error == DecodeError::kOk);
    for (size_t len = 0; len < bytes.size(); ++len) {
      CAPTURE(len);
      for (bool as_response : {false, true}) {
        const Decoded d = decode_exact(bytes, len, as_response);
        CHECK(d.error != DecodeError::kOk);
        CHECK(d.header_valid == (len >= kHeaderSize));
        if (len < kHeaderSize) CHECK(d.error == DecodeError::kTooShort);
      }
    }
    // One byte too many is a length mismatch too.
    Bytes longer = bytes;
    longer.push_back(0);
    CHECK(decode_exact(longer, longer.size(), response).error == DecodeError::kLengthMismatch);
  }
}

TEST_CASE("client_protocol: kTooShort") {
  Raw raw;
  const Bytes full = raw.build();
  REQUIRE(full.size() == kMinDatagram);
  REQUIRE(decode_request(full).error == DecodeError::kOk);

  CHECK(decode_request({}).error == DecodeError::kTooShort);
  CHECK(decode_response({}).error == DecodeError::kTooShort);
  CHECK(decode_response(std::span(full).first(19)).error == DecodeError::kTooShort);
  CHECK_FALSE(decode_response(std::span(full).first(19)).header_valid);

  // A well-framed 47-byte request is still too short to answer, even with a wrong version.
  raw.body = {0x00, 0x19};
  raw.body.resize(27, 0);
  raw.pad = false;
  REQUIRE(raw.build().size() == 47);
  Decoded d = decode_request(raw.build());
  CHECK(d.error == DecodeError::kTooShort);
  CHECK(d.header_valid);
  CHECK_FALSE(error_reply_status(d.error).has_value());
  raw.version = 2;
  CHECK(decode_request(raw.build()).error == DecodeError::kTooShort);

  // Responses have no minimum: a header-only reply is fine.
  Raw reply;
  reply.op_byte = 0x81;
  reply.status = 2;
  reply.pad = false;
  CHECK(decode_response(reply.build()).error == DecodeError::kOk);
}

TEST_CASE("client_protocol: kBadMagic") {
  const std::pair<uint8_t, uint8_t> magics[] = {{0x48, 0x49}, {0x49, 0x00}, {0x00, 0x48}};
  for (auto [m0, m1] : magics) {
    Raw raw;
    raw.magic0 = m0;
    raw.magic1 = m1;
    const Decoded d = decode_request(raw.build());
    CHECK(d.error == DecodeError::kBadMagic);
    CHECK_FALSE(d.header_valid);
    CHECK_FALSE(error_reply_status(d.error).has_value());
    CHECK(decode_response(raw.build()).error == DecodeError::kBadMagic);
  }
}

TEST_CASE("client_protocol: kBadVersion") {
  for (uint8_t v : {0, 2, 255}) {
    Raw raw;
    raw.version = v;
    raw.body_len = 999;  // a foreign version's body is not looked at
    const Decoded d = decode_request(raw.build());
    CHECK(d.error == DecodeError::kBadVersion);
    CHECK(d.header_valid);
    CHECK(d.header.version == v);
    CHECK(d.header.request_id == raw.request_id);
    raw.op_byte = 0x81;
    CHECK(decode_response(raw.build()).error == DecodeError::kBadVersion);
  }
}

TEST_CASE("client_protocol: kLengthMismatch") {
  for (uint16_t len : {0, 27, 29, 65535}) {
    Raw raw;
    raw.body_len = len;  // the real body is 28 bytes
    const Decoded d = decode_request(raw.build());
    CHECK(d.error == DecodeError::kLengthMismatch);
    CHECK(d.header_valid);
    CHECK(error_reply_status(d.error) == Status::kBadRequest);
  }
}

TEST_CASE("client_protocol: kTlvOverrun") {
  Raw raw;
  raw.pad = false;
  // PAD claiming 27 value bytes in a 28-byte body: fine. Claiming 28: runs 1 past.
  raw.body = {0x00, 26};
  raw.body.resize(28, 0);
  CHECK(decode_request(raw.build()).error == DecodeError::kOk);
  raw.body[1] = 27;
  CHECK(decode_request(raw.build()).error == DecodeError::kTlvOverrun);
  // A lone type byte at the end of the body: the TLV header itself overruns.
  raw.body = {0x00, 25};
  raw.body.resize(28, 0);
  CHECK(decode_request(raw.build()).error == DecodeError::kTlvOverrun);
  // A known TLV cut short by the end of the body.
  raw.body = {0x00, 23};
  raw.body.resize(25, 0);
  raw.body.insert(raw.body.end(), {0x02, 0x04, 0x00});  // AGE with 1 of its 4 bytes
  CHECK(decode_request(raw.build()).error == DecodeError::kTlvOverrun);
  // An unknown TLV overrunning is still an overrun.
  raw.body = {0x00, 24};
  raw.body.resize(26, 0);
  raw.body.push_back(0x77);
  raw.body.push_back(1);
  CHECK(decode_request(raw.build()).error == DecodeError::kTlvOverrun);
}

TEST_CASE("client_protocol: kBadTlv") {
  const Bytes v4 = {0x01, 0x07, 0x04, 0x00, 0x50, 0x0a, 0x00, 0x00, 0x01};
  const Bytes age = {0x02, 0x04, 0x00, 0x00, 0x00, 0x01};
  // Made at full size, not grown from two bytes: g++ 12 at -O3 reports a false -Warray-bounds
  // and -Wstringop-overread on resizing a two-byte vector (GCC bug 107852).
  auto tlv = [](uint8_t type, uint8_t len, uint8_t first = 0) {
    Bytes b(2 + len, 0);
    b[0] = type;
    b[1] = len;
    if (len > 0) b[2] = first;
    return b;
  };
  const std::vector<Bytes> bad_bodies = {
      {0x01, 0x08, 0x04, 0x00, 0x50, 0x0a, 0x00, 0x00, 0x01, 0x00},  // v4 ENDPOINT, length 8
      {0x01, 0x07, 0x06, 0x00, 0x50, 0x0a, 0x00, 0x00, 0x01},        // family 6, length 7
      {0x01, 0x07, 0x05, 0x00, 0x50, 0x0a, 0x00, 0x00, 0x01},        // family 5
      {0x01, 0x00},                                                  // empty ENDPOINT
      tlv(0x01, 19, 4),                                              // family 4, length 19
      tlv(0x01, 255, 6),                                             // family 6, length 255
      tlv(0x02, 3),                                                  // AGE length 3
      tlv(0x02, 5),                                                  // AGE length 5
      tlv(0x03, 27),                                                 // TOKEN length 27
      tlv(0x03, 29),                                                 // TOKEN length 29
      tlv(0x04, 9),                                                  // TABLE_VERSION length 9
      tlv(0x04, 0),                                                  // TABLE_VERSION length 0
  };
  for (const Bytes& body : bad_bodies) {
    Raw raw;
    raw.body = body;
    const Decoded d = decode_request(raw.build());
    CHECK(d.error == DecodeError::kBadTlv);
    CHECK(d.header_valid);
    CHECK(error_reply_status(d.error) == Status::kBadRequest);
  }
  // Duplicates, even with a PAD or an unknown TLV between them.
  Raw dup;
  dup.body = v4;
  dup.body.insert(dup.body.end(), {0x00, 0x00, 0x99, 0x01, 0x00});
  dup.body.insert(dup.body.end(), v4.begin(), v4.end());
  CHECK(decode_request(dup.build()).error == DecodeError::kBadTlv);
  dup.body = age;
  dup.body.insert(dup.body.end(), age.begin(), age.end());
  dup.op_byte = 0x83;
  dup.pad = false;
  CHECK(decode_response(dup.build()).error == DecodeError::kBadTlv);
}

TEST_CASE("client_protocol: kBadOp") {
  for (uint8_t op : {0x00, 0x06, 0x7f, 0x80, 0x81, 0x85, 0x86, 0xff}) {
    Raw raw;
    raw.op_byte = op;
    const Decoded d = decode_request(raw.build());
    CHECK(d.error == DecodeError::kBadOp);
    CHECK(d.header_valid);
    CHECK(d.header.op_byte == op);
  }
  for (uint8_t op : {0x00, 0x01, 0x05, 0x06, 0x80, 0x86, 0xff}) {
    Raw raw;
    raw.op_byte = op;
    raw.pad = false;
    CHECK(decode_response(raw.build()).error == DecodeError::kBadOp);
  }
}

TEST_CASE("client_protocol: kBadField") {
  Raw raw;
  raw.status = 1;
  CHECK(decode_request(raw.build()).error == DecodeError::kBadField);
  raw.status = 0;
  raw.flags = 0x80;
  CHECK(decode_request(raw.build()).error == DecodeError::kBadField);
  raw.flags = 0;
  raw.op_byte = 5;  // PING
  raw.user_id = 1;
  CHECK(decode_request(raw.build()).error == DecodeError::kBadField);
  raw.user_id = 0;
  CHECK(decode_request(raw.build()).error == DecodeError::kOk);
  raw.op_byte = 3;  // user_id 0 is accepted elsewhere: policy, not framing
  CHECK(decode_request(raw.build()).error == DecodeError::kOk);

  Raw resp;
  resp.op_byte = 0x82;
  resp.pad = false;
  resp.status = 7;
  CHECK(decode_response(resp.build()).error == DecodeError::kOk);
  resp.status = 8;  // not defined in version 1
  CHECK(decode_response(resp.build()).error == DecodeError::kBadField);
  resp.status = 0;
  resp.flags = 1;
  CHECK(decode_response(resp.build()).error == DecodeError::kBadField);
}

TEST_CASE("client_protocol: unknown TLVs are skipped and PAD may appear anywhere") {
  Raw raw;
  raw.op_byte = 2;                                                   // HEARTBEAT
  raw.body = {0x00, 0x00,                                            // empty PAD
              0x05, 0x02, 0xaa, 0xbb,                                // unknown type 5
              0x01, 0x07, 0x04, 0x14, 0x66, 0xc0, 0x00, 0x02, 0x01,  // ENDPOINT
              0xff, 0x00,                                            // unknown type 255, empty
              0x00, 0x03, 0x01, 0x02, 0x03};                         // PAD with non-zero bytes
  const Decoded d = decode_request(raw.build());
  REQUIRE(d.error == DecodeError::kOk);
  CHECK(d.msg.op == Op::kHeartbeat);
  CHECK(d.msg.endpoint == v4_endpoint());
  CHECK_FALSE(d.msg.age.has_value());
  CHECK_FALSE(d.msg.token.has_value());

  // An unknown TLV with a full 255-byte value.
  Raw big;
  big.body.assign(257, 0x5a);  // at full size, as in kBadTlv's tlv()
  big.body[0] = 0xfe;
  big.body[1] = 0xff;
  CHECK(decode_request(big.build()).error == DecodeError::kOk);
}

TEST_CASE("client_protocol: a v4-mapped IPv6 endpoint is returned as given") {
  Message m;
  m.op = Op::kLogin;
  m.user_id = 1;
  m.endpoint = Endpoint::v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, 9);
  const Decoded d = decode_request(enc_request(m));
  REQUIRE(d.error == DecodeError::kOk);
  CHECK(d.msg.endpoint->family == 6);
  CHECK(d.msg.endpoint->unmapped() == Endpoint::v4(0x0a000001, 9));
}

TEST_CASE("client_protocol: request padding") {
  Message m;
  m.op = Op::kLookup;
  m.user_id = 3;
  // No padding asked: header only.
  CHECK(enc_request(m, 0).size() == kHeaderSize);
  CHECK(decode_response(enc_request(m, 0)).error == DecodeError::kBadOp);
  // A shortfall of one byte takes a 2-byte PAD.
  CHECK(enc_request(m, 21).size() == 22);
  CHECK(enc_request(m, 22).size() == 22);
  m.token = sample_token();  // 20 + 30 = 50 bytes, over 48 already
  CHECK(enc_request(m).size() == 50);
  // Beyond one PAD TLV's reach, including the awkward remainders.
  for (size_t pad_to : {size_t{307}, size_t{308}, size_t{309}, size_t{565}, size_t{1000},
                        size_t{65535}, kMaxDatagram}) {
    const Bytes b = enc_request(m, pad_to);
    CAPTURE(pad_to);
    CHECK(b.size() == pad_to);
    const Decoded d = decode_request(b);
    REQUIRE(d.error == DecodeError::kOk);
    CHECK(d.msg == m);
  }
  CHECK(enc_request(m, kMaxDatagram + 100).size() == kMaxDatagram);
}

TEST_CASE("client_protocol: encoding into too-small buffers returns 0") {
  Message m;
  m.op = Op::kLookup;
  m.user_id = 3;
  m.endpoint = v6_endpoint();
  m.age = 5;
  const size_t req_size = enc_request(m, 100).size();
  const size_t resp_size = enc_response(m).size();
  for (size_t n = 0; n < req_size; ++n) {
    Bytes out(n);  // exact size: ASan catches a write past it
    CHECK(encode_request(m, out, 100) == 0);
  }
  for (size_t n = 0; n < resp_size; ++n) {
    Bytes out(n);
    CHECK(encode_response(m, out) == 0);
  }
  for (size_t n = 0; n < kHeaderSize; ++n) {
    Bytes out(n);
    CHECK(encode_error_reply(Header{}, Status::kBadRequest, out) == 0);
  }
  Bytes exact(resp_size);
  CHECK(encode_response(m, exact) == resp_size);
}

TEST_CASE("client_protocol: unencodable messages return 0") {
  Bytes out(kMinDatagram * 2);
  Message m;
  m.op = static_cast<Op>(0);
  CHECK(encode_request(m, out) == 0);
  CHECK(encode_response(m, out) == 0);
  m.op = static_cast<Op>(6);
  CHECK(encode_response(m, out) == 0);
  m.op = Op::kLogin;
  m.endpoint = Endpoint{};  // family 0
  CHECK(encode_request(m, out) == 0);
  CHECK(encode_response(m, out) == 0);
}

TEST_CASE("client_protocol: error replies echo the request header") {
  Raw raw;
  raw.op_byte = 0x86;  // not an op: the reply still echoes it
  raw.request_id = 0x01020304;
  const Decoded d = decode_request(raw.build());
  REQUIRE(d.error == DecodeError::kBadOp);
  Bytes out(kHeaderSize);
  REQUIRE(encode_error_reply(d.header, Status::kBadRequest, out) == kHeaderSize);
  const Decoded r = decode_response(out);
  CHECK(r.error == DecodeError::kBadOp);  // 0x86 is no op, so the client cannot decode it either
  CHECK(r.header.op_byte == 0x86);
  CHECK(r.header.request_id == 0x01020304);
  CHECK(r.header.status == static_cast<uint8_t>(Status::kBadRequest));
  CHECK(r.header.body_len == 0);
}

TEST_CASE("client_protocol: every single-byte change of a valid request decodes safely") {
  Message m;
  m.op = Op::kHeartbeat;
  m.user_id = 12;
  m.endpoint = v4_endpoint();
  m.token = sample_token();
  const Bytes good = enc_request(m);
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned v = 0; v < 256; ++v) {
      Bytes b = good;
      b[i] = static_cast<uint8_t>(v);
      const Decoded d = decode_request(b);
      if (d.error != DecodeError::kOk) continue;
      const Decoded again = decode_request(enc_request(d.msg));
      REQUIRE(again.error == DecodeError::kOk);
      CHECK(again.msg == d.msg);
    }
  }
}

TEST_CASE("client_protocol: names") {
  CHECK(std::string(to_string(Op::kHeartbeat)) == "HEARTBEAT");
  CHECK(std::string(to_string(static_cast<Op>(9))) == "UNKNOWN");
  CHECK(std::string(to_string(Status::kRateLimited)) == "RATE_LIMITED");
  CHECK(std::string(to_string(Status::kUnsupportedVersion)) == "UNSUPPORTED_VERSION");
  CHECK(std::string(to_string(static_cast<Status>(8))) == "UNKNOWN");
  CHECK(std::string(to_string(DecodeError::kTlvOverrun)) == "tlv_overrun");
  CHECK(std::string(to_string(static_cast<DecodeError>(200))) == "unknown");
}

TEST_CASE("client_protocol: has_required_tlvs") {
  Message m;
  m.response = true;
  m.op = Op::kLookup;
  m.endpoint = v4_endpoint();
  CHECK_FALSE(has_required_tlvs(m));
  m.age = 0;
  CHECK(has_required_tlvs(m));
  m.op = Op::kPing;
  CHECK_FALSE(has_required_tlvs(m));
  m.status = Status::kUnavailable;
  CHECK(has_required_tlvs(m));
  m.status = Status::kOk;
  m.op = Op::kLogout;
  m.endpoint.reset();
  m.age.reset();
  CHECK(has_required_tlvs(m));
  m.op = Op::kLogin;
  CHECK_FALSE(has_required_tlvs(m));
  m.response = false;
  CHECK(has_required_tlvs(m));
}

}  // namespace imhash::client
