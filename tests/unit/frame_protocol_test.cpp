#include "common/frame_protocol.h"

#include <doctest/doctest.h>

#include <vector>

using namespace imhash;
using namespace imhash::frame;

namespace {

std::vector<Request> sample_requests() {
  std::vector<Request> v;
  Request hello{.type = FrameType::kHello, .correlation = 1, .protocol_version = kProtocolVersion};
  hello.shard = 3;
  hello.name = "login-1/worker-0";
  v.push_back(hello);
  Request up{.type = FrameType::kUpsert, .correlation = 2, .table_version = 7, .id = 42};
  up.endpoint = Endpoint::v4(0x7f000001, 5000);
  up.age_seconds = 9;
  v.push_back(up);
  Request up6 = up;
  up6.flags = kFlagIfAbsent;
  up6.endpoint = Endpoint::v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 65535);
  v.push_back(up6);
  v.push_back(Request{.type = FrameType::kGet,
                      .flags = kFlagAnyOwner,
                      .correlation = 3,
                      .table_version = 8,
                      .id = ~0ULL});
  v.push_back(Request{.type = FrameType::kDelete, .correlation = 4, .id = 0});
  v.push_back(Request{.type = FrameType::kStats, .correlation = 5});
  Request purge{.type = FrameType::kPurge, .correlation = 6};
  purge.purge = PurgeAction::kOlderThan;
  purge.age_seconds = 3600;
  v.push_back(purge);
  v.push_back(Request{.type = FrameType::kPing, .correlation = 0xffffffff});
  return v;
}

std::vector<Response> sample_responses() {
  std::vector<Response> v;
  Response hello{.type = FrameType::kHello, .correlation = 1, .table_version = 3};
  hello.protocol_version = kProtocolVersion;
  hello.shard_count = 4;
  hello.name = "hash1";
  v.push_back(hello);
  Response get{.type = FrameType::kGet, .correlation = 2};
  get.endpoint = Endpoint::v4(0x01020304, 80);
  get.age_seconds = 17;
  v.push_back(get);
  v.push_back(
      Response{.type = FrameType::kGet, .status = FrameStatus::kNotFound, .correlation = 3});
  v.push_back(Response{.type = FrameType::kUpsert,
                       .status = FrameStatus::kMoved,
                       .correlation = 4,
                       .table_version = 12});
  Response stats{.type = FrameType::kStats, .correlation = 5};
  stats.stat_count = kStatCount;
  for (uint8_t i = 0; i < kStatCount; ++i) stats.stats[i] = 1000u + i;
  v.push_back(stats);
  Response purge{.type = FrameType::kPurge, .correlation = 6};
  purge.purge = {PurgeState::kRunning, PurgeAction::kNotOwned, 100, 1024, 7};
  v.push_back(purge);
  v.push_back(Response{.type = FrameType::kPing, .correlation = 7});
  return v;
}

struct OneFrame {
  Header h;
  std::span<const uint8_t> body;
};

// Splits `buf`, which must hold exactly one whole frame.
OneFrame split_one(const std::vector<uint8_t>& buf) {
  OneFrame f;
  size_t used = 0;
  REQUIRE(next_frame(buf, f.h, f.body, used) == DecodeStatus::kOk);
  CHECK(used == buf.size());
  return f;
}

}  // namespace

TEST_CASE("frame_protocol: every request and response round-trips") {
  for (const Request& q : sample_requests()) {
    std::vector<uint8_t> buf;
    append_request(q, buf);
    const auto [h, body] = split_one(buf);
    Request back;
    REQUIRE(decode_request(h, body, back) == DecodeStatus::kOk);
    CHECK(back == q);
  }
  for (const Response& s : sample_responses()) {
    std::vector<uint8_t> buf;
    append_response(s, buf);
    const auto [h, body] = split_one(buf);
    Response back;
    REQUIRE(decode_response(h, body, back) == DecodeStatus::kOk);
    CHECK(back == s);
  }
}

TEST_CASE("frame_protocol: golden bytes of an UPSERT and a GET reply") {
  Request up{.type = FrameType::kUpsert,
             .correlation = 0x01020304,
             .table_version = 5,
             .id = 0x1122334455667788ULL};
  up.endpoint = Endpoint::v4(0x7f000001, 0x1388);
  up.age_seconds = 2;
  std::vector<uint8_t> buf;
  append_request(up, buf);
  const std::vector<uint8_t> want = {0x00, 0x00, 0x00, 0x23,  // length 35 = 16 + 19
                                     0x02, 0x00, 0x00, 0x00,  // UPSERT, status, flags, reserved
                                     0x01, 0x02, 0x03, 0x04,  // correlation
                                     0,    0,    0,    0,    0,    0,    0,    5,  // table version
                                     0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // id
                                     0,    0,    0,    2,                             // age
                                     4,    0x13, 0x88, 127,  0,    0,    1};          // endpoint
  CHECK(buf == want);

  Response get{.type = FrameType::kGet, .correlation = 9, .table_version = 1};
  get.endpoint = Endpoint::v4(0x0a000002, 443);
  get.age_seconds = 300;
  buf.clear();
  append_response(get, buf);
  const std::vector<uint8_t> want_get = {0, 0, 0, 0x1b, 3, 0, 0,    0,  0, 0, 0, 9, 0, 0, 0,   0,
                                         0, 0, 0, 1,    4, 1, 0xbb, 10, 0, 0, 2, 0, 0, 1, 0x2c};
  CHECK(buf == want_get);
}

TEST_CASE("frame_protocol: a stream split into pieces of every size decodes the same") {
  std::vector<uint8_t> stream;
  const auto requests = sample_requests();
  for (int round = 0; round < 20; ++round) {
    for (const Request& q : requests) append_request(q, stream);
  }
  const size_t expected = 20 * requests.size();
  for (size_t piece = 1; piece <= stream.size(); piece += (piece < 64 ? 1 : 97)) {
    std::vector<uint8_t> pending;  // what a connection has buffered but not yet parsed
    size_t fed = 0, decoded = 0;
    while (fed < stream.size()) {
      const size_t n = std::min(piece, stream.size() - fed);
      pending.insert(pending.end(), stream.begin() + fed, stream.begin() + fed + n);
      fed += n;
      size_t off = 0;
      for (;;) {
        Header h;
        std::span<const uint8_t> body;
        size_t used = 0;
        auto st = next_frame(std::span(pending).subspan(off), h, body, used);
        if (st == DecodeStatus::kNeedMore) break;
        REQUIRE(st == DecodeStatus::kOk);
        Request q;
        REQUIRE(decode_request(h, body, q) == DecodeStatus::kOk);
        CHECK(q == requests[decoded % requests.size()]);
        ++decoded;
        off += used;
      }
      pending.erase(pending.begin(), pending.begin() + off);
    }
    CHECK(decoded == expected);
    CHECK(pending.empty());
  }
}

TEST_CASE("frame_protocol: every truncation of a frame needs more bytes, never succeeds") {
  for (const Request& q : sample_requests()) {
    std::vector<uint8_t> buf;
    append_request(q, buf);
    for (size_t len = 0; len < buf.size(); ++len) {
      Header h;
      std::span<const uint8_t> body;
      size_t used = 1;
      CHECK(next_frame(std::span(buf).first(len), h, body, used) == DecodeStatus::kNeedMore);
      CHECK(used == 0);
    }
  }
}

TEST_CASE("frame_protocol: hostile headers are rejected before buffering") {
  Header h;
  std::span<const uint8_t> body;
  size_t used = 0;
  std::vector<uint8_t> huge = {0x7f, 0xff, 0xff, 0xff, 2};
  CHECK(next_frame(huge, h, body, used) == DecodeStatus::kTooLarge);
  std::vector<uint8_t> tiny = {0, 0, 0, 3, 2, 0, 0};
  CHECK(next_frame(tiny, h, body, used) == DecodeStatus::kTooSmall);
  std::vector<uint8_t> bad_type = {0, 0, 0, 16, 99};
  CHECK(next_frame(bad_type, h, body, used) == DecodeStatus::kBadType);

  std::vector<uint8_t> buf;
  append_request(Request{.type = FrameType::kPing}, buf);
  buf[7] = 1;
  CHECK(next_frame(buf, h, body, used) == DecodeStatus::kBadReserved);
}

TEST_CASE("frame_protocol: bodies of the wrong size or with bad fields are malformed") {
  auto decode = [](std::vector<uint8_t> buf) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    REQUIRE(next_frame(buf, h, body, used) == DecodeStatus::kOk);
    Request q;
    return decode_request(h, body, q);
  };
  std::vector<uint8_t> get;
  append_request(Request{.type = FrameType::kGet, .id = 5}, get);
  // One byte too many in the body (length field adjusted).
  auto longer = get;
  longer.push_back(0);
  longer[3] += 1;
  CHECK(decode(longer) == DecodeStatus::kBadBody);
  // One byte too few.
  auto shorter = get;
  shorter.pop_back();
  shorter[3] -= 1;
  CHECK(decode(shorter) == DecodeStatus::kBadBody);
  // Endpoint family 5.
  std::vector<uint8_t> up;
  Request upsert{.type = FrameType::kUpsert, .id = 1};
  upsert.endpoint = Endpoint::v4(1, 1);
  append_request(upsert, up);
  up[20 + 12] = 5;
  CHECK(decode(up) == DecodeStatus::kBadBody);
  // A request with a status byte set.
  auto with_status = get;
  with_status[5] = 1;
  CHECK(decode(with_status) == DecodeStatus::kBadBody);
  // Unknown purge action.
  std::vector<uint8_t> purge;
  append_request(Request{.type = FrameType::kPurge}, purge);
  purge[20] = 9;
  CHECK(decode(purge) == DecodeStatus::kBadBody);
}

TEST_CASE("frame_protocol: peek_request_id reads the id of keyed requests only") {
  for (const Request& q : sample_requests()) {
    std::vector<uint8_t> buf;
    append_request(q, buf);
    const auto [h, body] = split_one(buf);
    const bool keyed = is_keyed(q.type);
    const auto id = peek_request_id(h, body);
    CHECK(id.has_value() == keyed);
    if (keyed) CHECK(*id == q.id);
    // A keyed body too short to hold the id is not read (decode_request rejects it later).
    if (keyed) CHECK_FALSE(peek_request_id(h, body.first(7)).has_value());
  }
}
