#include "common/codec/frame_protocol.h"

#include <doctest/doctest.h>

#include <vector>

using namespace imhash;
using namespace imhash::frame;

namespace {

const Endpoint kV6 =
    Endpoint::v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 65535);

// `n` records, IPv4 and IPv6 alternating, ids and ages spread over their ranges.
std::vector<ImportRecord> import_records(size_t n) {
  std::vector<ImportRecord> v;
  for (size_t i = 0; i < n; ++i) {
    ImportRecord r;
    r.id = i * 0x9e3779b97f4a7c15ULL;
    r.age_seconds = static_cast<uint32_t>(i * 2654435761u);
    if (i % 2) {
      r.endpoint = Endpoint::v4(static_cast<uint32_t>(0x0a000000 + i),
                                static_cast<uint16_t>(1024 + i % 60000));
    } else {
      auto addr = kV6.addr;
      addr[14] = static_cast<uint8_t>(i >> 8);
      addr[15] = static_cast<uint8_t>(i);
      r.endpoint = Endpoint::v6(addr, static_cast<uint16_t>(i + 1));
    }
    v.push_back(r);
  }
  return v;
}

std::vector<uint8_t> encode_records(const std::vector<ImportRecord>& records) {
  std::vector<uint8_t> out;
  for (const ImportRecord& r : records) append_import_record(r, out);
  return out;
}

std::string_view as_view(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Request import_request(const std::vector<uint8_t>& records, uint16_t count) {
  Request q{.type = FrameType::kImport, .correlation = 11, .table_version = 9};
  q.record_count = count;
  q.records = as_view(records);
  return q;
}

std::vector<ImportRecord> read_records(std::string_view records) {
  std::vector<ImportRecord> v;
  ImportRecord r;
  while (next_import_record(records, r)) v.push_back(r);
  CHECK(records.empty());
  return v;
}

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
  up6.endpoint = kV6;
  v.push_back(up6);
  v.push_back(Request{.type = FrameType::kGet,
                      .flags = kFlagAnyOwner,
                      .correlation = 3,
                      .table_version = 8,
                      .id = ~0ULL});
  v.push_back(Request{.type = FrameType::kDelete, .correlation = 4, .id = 0});
  Request timed_up = up;
  timed_up.flags = kFlagTimed;
  v.push_back(timed_up);
  Request timed_delete{.type = FrameType::kDelete, .flags = kFlagTimed, .correlation = 4, .id = 77};
  timed_delete.age_seconds = 61;
  v.push_back(timed_delete);
  v.push_back(Request{.type = FrameType::kStats, .correlation = 5});
  Request purge{.type = FrameType::kPurge, .correlation = 6};
  purge.purge = PurgeAction::kOlderThan;
  purge.age_seconds = 3600;
  v.push_back(purge);
  v.push_back(Request{.type = FrameType::kPing, .correlation = 0xffffffff});
  static const std::vector<uint8_t> three = encode_records(import_records(3));
  v.push_back(import_request(three, 3));
  static const std::vector<uint8_t> none;
  v.push_back(import_request(none, 0));
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
  v.push_back(Response{.type = FrameType::kImport, .correlation = 8, .table_version = 4});
  v.push_back(
      Response{.type = FrameType::kImport, .status = FrameStatus::kWrongShard, .correlation = 9});
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
  REQUIRE(next_frame(buf, f.h, f.body, used) == frame::DecodeStatus::kOk);
  CHECK(used == buf.size());
  return f;
}

// decode_request's verdict on `buf`, which must hold exactly one whole frame.
frame::DecodeStatus decode(const std::vector<uint8_t>& buf) {
  const auto [h, body] = split_one(buf);
  Request q;
  return decode_request(h, body, q);
}

}  // namespace

TEST_CASE("frame_protocol: every request and response round-trips") {
  for (const Request& q : sample_requests()) {
    std::vector<uint8_t> buf;
    append_request(q, buf);
    const auto [h, body] = split_one(buf);
    Request back;
    REQUIRE(decode_request(h, body, back) == frame::DecodeStatus::kOk);
    CHECK(back == q);
  }
  for (const Response& s : sample_responses()) {
    std::vector<uint8_t> buf;
    append_response(s, buf);
    const auto [h, body] = split_one(buf);
    Response back;
    REQUIRE(decode_response(h, body, back) == frame::DecodeStatus::kOk);
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

TEST_CASE("frame_protocol: a timed DELETE carries its age after the id, a plain one does not") {
  Request del{.type = FrameType::kDelete, .correlation = 1, .table_version = 2, .id = 3};
  del.age_seconds = 7;  // not sent without kFlagTimed
  std::vector<uint8_t> plain;
  append_request(del, plain);
  CHECK(plain.size() == 20 + 8);
  del.flags = kFlagTimed;
  std::vector<uint8_t> timed;
  append_request(del, timed);
  const std::vector<uint8_t> want = {0,    0, 0,    0x1c,              // length 28 = 16 + 12
                                     0x04, 0, 0x20, 0,                 // DELETE, kFlagTimed
                                     0,    0, 0,    1,                 // correlation
                                     0,    0, 0,    0,    0, 0, 0, 2,  // table version
                                     0,    0, 0,    0,    0, 0, 0, 3,  // id
                                     0,    0, 0,    7};                // age
  CHECK(timed == want);
  // Without the age, a timed DELETE is malformed; a plain one with it is too.
  auto short_timed = plain;
  short_timed[6] = kFlagTimed;
  CHECK(decode(short_timed) == frame::DecodeStatus::kBadBody);
  auto long_plain = timed;
  long_plain[6] = 0;
  CHECK(decode(long_plain) == frame::DecodeStatus::kBadBody);
}

TEST_CASE("frame_protocol: untimed frames for a server that does not understand kFlagTimed") {
  std::vector<uint8_t> scratch;
  const uint64_t now_ms = 0x1'2345'6789'0000ULL + 5'250;  // beyond 32 bits: only the low ones count
  Request up{.type = FrameType::kUpsert, .flags = kFlagTimed | kFlagAnyOwner, .id = 3};
  up.age_seconds = static_cast<uint32_t>(now_ms - 4'200);  // made 4.2 s ago
  const Request u = untimed(up, now_ms, scratch);
  CHECK(u.flags == kFlagAnyOwner);
  CHECK(u.age_seconds == 4);
  up.age_seconds = static_cast<uint32_t>(now_ms + 300);  // "made later": clocks apart
  CHECK(untimed(up, now_ms, scratch).age_seconds == 0);
  Request del{.type = FrameType::kDelete, .flags = kFlagTimed, .id = 3, .age_seconds = 77};
  const Request d = untimed(del, now_ms, scratch);
  CHECK(d.flags == 0);
  CHECK(d.age_seconds == 0);
  std::vector<uint8_t> encoded;
  append_request(d, encoded);
  CHECK(encoded.size() == 20 + 8);  // no time after the id
  // An IMPORT's records become ages at now (seconds), in a copy; the frame it came from is intact.
  std::vector<uint8_t> records;
  append_import_record({.id = 1,
                        .age_seconds = static_cast<uint32_t>(now_ms / 1000) - 9,
                        .endpoint = Endpoint::v4(0x01020304, 5)},
                       records);
  const std::vector<uint8_t> before = records;
  Request imp{.type = FrameType::kImport, .flags = kFlagTimed, .record_count = 1};
  imp.records = std::string_view(reinterpret_cast<const char*>(records.data()), records.size());
  const Request i = untimed(imp, now_ms, scratch);
  CHECK(i.flags == 0);
  std::string_view rest = i.records;
  ImportRecord r;
  REQUIRE(next_import_record(rest, r));
  CHECK(r.age_seconds == 9);
  CHECK(records == before);
  // Frames without the flag go as they are.
  Request plain{.type = FrameType::kUpsert, .id = 3, .age_seconds = 12};
  CHECK(untimed(plain, now_ms, scratch) == plain);
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
        if (st == frame::DecodeStatus::kNeedMore) break;
        REQUIRE(st == frame::DecodeStatus::kOk);
        Request q;
        REQUIRE(decode_request(h, body, q) == frame::DecodeStatus::kOk);
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
      CHECK(next_frame(std::span(buf).first(len), h, body, used) == frame::DecodeStatus::kNeedMore);
      CHECK(used == 0);
    }
  }
}

TEST_CASE("frame_protocol: hostile headers are rejected before buffering") {
  Header h;
  std::span<const uint8_t> body;
  size_t used = 0;
  std::vector<uint8_t> huge = {0x7f, 0xff, 0xff, 0xff, 2};
  CHECK(next_frame(huge, h, body, used) == frame::DecodeStatus::kTooLarge);
  std::vector<uint8_t> tiny = {0, 0, 0, 3, 2, 0, 0};
  CHECK(next_frame(tiny, h, body, used) == frame::DecodeStatus::kTooSmall);
  std::vector<uint8_t> bad_type = {0, 0, 0, 16, 99};
  CHECK(next_frame(bad_type, h, body, used) == frame::DecodeStatus::kBadType);

  std::vector<uint8_t> buf;
  append_request(Request{.type = FrameType::kPing}, buf);
  buf[7] = 1;
  CHECK(next_frame(buf, h, body, used) == frame::DecodeStatus::kBadReserved);
}

TEST_CASE("frame_protocol: bodies of the wrong size or with bad fields are malformed") {
  std::vector<uint8_t> get;
  append_request(Request{.type = FrameType::kGet, .id = 5}, get);
  // One byte too many in the body (length field adjusted).
  auto longer = get;
  longer.push_back(0);
  longer[3] += 1;
  CHECK(decode(longer) == frame::DecodeStatus::kBadBody);
  // One byte too few.
  auto shorter = get;
  shorter.pop_back();
  shorter[3] -= 1;
  CHECK(decode(shorter) == frame::DecodeStatus::kBadBody);
  // Endpoint family 5.
  std::vector<uint8_t> up;
  Request upsert{.type = FrameType::kUpsert, .id = 1};
  upsert.endpoint = Endpoint::v4(1, 1);
  append_request(upsert, up);
  up[20 + 12] = 5;
  CHECK(decode(up) == frame::DecodeStatus::kBadBody);
  // A request with a status byte set.
  auto with_status = get;
  with_status[5] = 1;
  CHECK(decode(with_status) == frame::DecodeStatus::kBadBody);
  // Unknown purge action.
  std::vector<uint8_t> purge;
  append_request(Request{.type = FrameType::kPurge}, purge);
  purge[20] = 9;
  CHECK(decode(purge) == frame::DecodeStatus::kBadBody);
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

TEST_CASE("frame_protocol: IMPORT round-trips 0, a few and kMaxImportRecords records") {
  for (const size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, kMaxImportRecords}) {
    CAPTURE(n);
    const auto records = import_records(n);
    const auto encoded = encode_records(records);
    const Request q = import_request(encoded, static_cast<uint16_t>(n));
    std::vector<uint8_t> buf;
    append_request(q, buf);
    CHECK(buf.size() <= 4 + size_t{kMaxFrameLength});
    const auto [h, body] = split_one(buf);
    CHECK(h.type == FrameType::kImport);
    Request back;
    REQUIRE(decode_request(h, body, back) == frame::DecodeStatus::kOk);
    CHECK(back == q);
    CHECK(back.record_count == n);
    // `records` points into the decoded bytes, just after the count.
    CHECK(back.records.size() == body.size() - 2);
    if (n > 0) CHECK(reinterpret_cast<const uint8_t*>(back.records.data()) == body.data() + 2);
    CHECK(read_records(back.records) == records);
  }
  // The largest batch the limit allows, all IPv6, still fits in one frame.
  std::vector<ImportRecord> v6(kMaxImportRecords);
  for (size_t i = 0; i < v6.size(); ++i) v6[i] = ImportRecord{i, 0, kV6};
  const auto encoded = encode_records(v6);
  CHECK(encoded.size() == kMaxImportRecords * 31);
  std::vector<uint8_t> buf;
  append_request(import_request(encoded, kMaxImportRecords), buf);
  const auto [h, body] = split_one(buf);
  Request back;
  REQUIRE(decode_request(h, body, back) == frame::DecodeStatus::kOk);
  CHECK(read_records(back.records) == v6);
}

TEST_CASE("frame_protocol: golden bytes of an IMPORT of an IPv4 and an IPv6 record") {
  std::vector<uint8_t> records;
  append_import_record(ImportRecord{0x0102030405060708ULL, 3, Endpoint::v4(0x0a000001, 0x1f90)},
                       records);
  append_import_record(ImportRecord{42, 0x00010000, Endpoint::v6(kV6.addr, 443)}, records);
  Request q{.type = FrameType::kImport, .correlation = 0x0a0b0c0d, .table_version = 7};
  q.record_count = 2;
  q.records = as_view(records);
  std::vector<uint8_t> buf;
  append_request(q, buf);
  const std::vector<uint8_t> want = {
      0x00, 0x00, 0x00, 0x44,                          // length 68 = 16 + 52
      0x09, 0x00, 0x00, 0x00,                          // IMPORT, status, flags, reserved
      0x0a, 0x0b, 0x0c, 0x0d,                          // correlation
      0,    0,    0,    0,    0,    0,    0,    7,     // table version
      0x00, 0x02,                                      // count
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // id
      0,    0,    0,    3,                             // age
      4,    0x1f, 0x90, 10,   0,    0,    1,           // endpoint 10.0.0.1:8080
      0,    0,    0,    0,    0,    0,    0,    42,    // id
      0x00, 0x01, 0x00, 0x00,                          // age
      6,    0x01, 0xbb,                                // family 6, port 443
      0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,     // 2001:db8::1
      0,    0,    0,    0,    0,    0,    0,    1};
  CHECK(buf == want);

  const auto [h, body] = split_one(want);
  Request back;
  REQUIRE(decode_request(h, body, back) == frame::DecodeStatus::kOk);
  CHECK(back.correlation == 0x0a0b0c0d);
  CHECK(back.table_version == 7);
  CHECK(back.record_count == 2);
  CHECK(read_records(back.records) ==
        std::vector<ImportRecord>{{0x0102030405060708ULL, 3, Endpoint::v4(0x0a000001, 0x1f90)},
                                  {42, 0x00010000, Endpoint::v6(kV6.addr, 443)}});
}

TEST_CASE("frame_protocol: malformed IMPORT bodies are rejected") {
  // Builds an IMPORT frame claiming `count` records over `records` as they are.
  auto frame_of = [](uint16_t count, const std::vector<uint8_t>& records) {
    std::vector<uint8_t> buf;
    append_request(import_request(records, count), buf);
    return buf;
  };

  // A count above the limit, even with that many well-formed records behind it.
  const auto over = encode_records(import_records(kMaxImportRecords + 1));
  CHECK(decode(frame_of(kMaxImportRecords + 1, over)) == frame::DecodeStatus::kBadBody);
  CHECK(decode(frame_of(0xffff, {})) == frame::DecodeStatus::kBadBody);
  const auto at_limit = encode_records(import_records(kMaxImportRecords));
  CHECK(decode(frame_of(kMaxImportRecords, at_limit)) == frame::DecodeStatus::kOk);

  const auto two = encode_records(import_records(2));  // an IPv6 record, then an IPv4 one
  REQUIRE(two.size() == 31 + 19);
  CHECK(decode(frame_of(2, two)) == frame::DecodeStatus::kOk);
  // A count above the records present, and a record cut anywhere (id, age, family, port,
  // address).
  CHECK(decode(frame_of(3, two)) == frame::DecodeStatus::kBadBody);
  CHECK(decode(frame_of(1, {})) == frame::DecodeStatus::kBadBody);
  for (size_t cut = 1; cut < two.size(); ++cut) {
    if (cut == 31) continue;  // a whole first record: the count makes it a short body below
    CAPTURE(cut);
    const std::vector<uint8_t> part(two.begin(), two.begin() + static_cast<long>(cut));
    CHECK(decode(frame_of(cut < 31 ? 1 : 2, part)) == frame::DecodeStatus::kBadBody);
  }
  CHECK(decode(frame_of(2, std::vector<uint8_t>(two.begin(), two.begin() + 31))) ==
        frame::DecodeStatus::kBadBody);
  // An empty body (not even the count), and a count cut in half.
  std::vector<uint8_t> empty = frame_of(0, {});
  empty.resize(empty.size() - 2);
  empty[3] -= 2;
  CHECK(decode(empty) == frame::DecodeStatus::kBadBody);
  std::vector<uint8_t> half = frame_of(0, {});
  half.pop_back();
  half[3] -= 1;
  CHECK(decode(half) == frame::DecodeStatus::kBadBody);

  // Trailing bytes: fewer records claimed than sent, or a stray byte after the last.
  CHECK(decode(frame_of(1, two)) == frame::DecodeStatus::kBadBody);
  CHECK(decode(frame_of(0, {0})) == frame::DecodeStatus::kBadBody);
  auto trailing = two;
  trailing.push_back(0);
  CHECK(decode(frame_of(2, trailing)) == frame::DecodeStatus::kBadBody);

  // A bad address family in the first or the second record (0, 5, and 4/6 swapped, which
  // changes the record's length).
  for (const uint8_t family : {uint8_t{0}, uint8_t{5}, uint8_t{255}}) {
    CAPTURE(int{family});
    auto bad = two;
    bad[12] = family;
    CHECK(decode(frame_of(2, bad)) == frame::DecodeStatus::kBadBody);
    bad = two;
    bad[31 + 12] = family;
    CHECK(decode(frame_of(2, bad)) == frame::DecodeStatus::kBadBody);
  }
  auto swapped = two;
  swapped[12] = 4;  // the IPv6 record read as IPv4 misaligns everything after it
  CHECK(decode(frame_of(2, swapped)) == frame::DecodeStatus::kBadBody);
  // An IMPORT request with a status byte set.
  auto with_status = frame_of(2, two);
  with_status[5] = 1;
  CHECK(decode(with_status) == frame::DecodeStatus::kBadBody);
}

TEST_CASE("frame_protocol: next_import_record stops at the end or at a bad record") {
  const auto encoded = encode_records(import_records(2));
  std::string_view rest = as_view(encoded);
  ImportRecord r;
  REQUIRE(next_import_record(rest, r));
  CHECK(r == import_records(2)[0]);
  CHECK(rest.size() == 19);
  REQUIRE(next_import_record(rest, r));
  CHECK(r == import_records(2)[1]);
  CHECK(rest.empty());
  CHECK_FALSE(next_import_record(rest, r));
  // Bytes decode_request did not validate: a cut record, or a bad family, ends the walk.
  std::string_view cut = as_view(encoded).substr(0, 30);
  CHECK_FALSE(next_import_record(cut, r));
  CHECK(cut.empty());
  auto bad = encoded;
  bad[12] = 7;
  std::string_view bad_view = as_view(bad);
  CHECK_FALSE(next_import_record(bad_view, r));
  CHECK(bad_view.empty());
}

TEST_CASE("frame_protocol: an IMPORT OK carries no body") {
  std::vector<uint8_t> buf;
  append_response(Response{.type = FrameType::kImport, .correlation = 5, .table_version = 2}, buf);
  CHECK(buf == std::vector<uint8_t>{0, 0, 0, 16, 9, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 2});
  const auto [h, body] = split_one(buf);
  CHECK(body.empty());
  Response back;
  REQUIRE(decode_response(h, body, back) == frame::DecodeStatus::kOk);
  CHECK(back.type == FrameType::kImport);
  CHECK(back.status == FrameStatus::kOk);
  CHECK(back.correlation == 5);
  // An OK with a body is malformed.
  buf.push_back(0);
  buf[3] += 1;
  const auto [h2, body2] = split_one(buf);
  CHECK(decode_response(h2, body2, back) == frame::DecodeStatus::kBadBody);
}
