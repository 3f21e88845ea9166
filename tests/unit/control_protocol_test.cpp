#include "common/routing/control_protocol.h"

#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "common/routing/table_json.h"

using namespace imhash;
using namespace imhash::control;

namespace {

Table modulo_table(uint64_t version) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kModulo;
  t.servers = {{"hash1", "127.0.0.1:7001", 4, 1}, {"hash2", "127.0.0.1:7002", 2, 3}};
  return t;
}

Table range_table(uint64_t version) {
  Table t = modulo_table(version);
  t.mode = RoutingMode::kRange;
  t.ranges = {{0, 2000, "hash1"}, {2001, ~0ULL, "hash2"}};
  return t;
}

std::vector<Message> samples() {
  std::vector<Message> v;
  v.push_back(Register{Role::kHash, "hash1", "127.0.0.1:7001", 4, 12, 4242, false, false});
  v.push_back(Register{Role::kLogin, "login-a", "[::1]:9000", 0, 0, 1, false, false});
  v.push_back(Register{Role::kLogin, "\xc3\xa9t\xc3\xa9 \"q\" \\", "", 0, ~0ULL, ~0ULL});
  v.push_back(Heartbeat{
      7,
      boost::json::object{{"records", 1000}, {"big", ~0ULL}, {"negative", -5}, {"ratio", 0.5}},
      {},
      0});
  v.push_back(Heartbeat{0, {}, {}, 0});
  v.push_back(
      Heartbeat{3, boost::json::object{{"received", 9}}, {{"hash1", 0}, {"hash2", ~0ULL}}, 0});
  v.push_back(Heartbeat{1, {}, {}, 1'790'000'000'000'000ULL});
  v.push_back(Heartbeat{4, {}, {}, 0, 5});  // seen_version: a hash server runs 5
  v.push_back(Ack{~0ULL});
  v.push_back(Ack{0});
  v.push_back(PurgeReport{});
  v.push_back(PurgeReport{
      {{0, frame::PurgeState::kRunning, frame::PurgeAction::kNotOwned, 10, 1024, 3},
       {1, frame::PurgeState::kDone, frame::PurgeAction::kOlderThan, 1024, 1024, 1000},
       {1023, frame::PurgeState::kCancelled, frame::PurgeAction::kAll, ~0ULL, ~0ULL, ~0ULL},
       {7, frame::PurgeState::kIdle, frame::PurgeAction::kStatus, 0, 0, 0}}});
  // Purge ids (issue 13): every shard carries the id of the command it ran.
  v.push_back(PurgeReport{
      {{0, frame::PurgeState::kDone, frame::PurgeAction::kAll, 5, 5, 5, 1764615094000},
       {1, frame::PurgeState::kRunning, frame::PurgeAction::kNotOwned, 1, 9, 0, ~0ULL}}});
  v.push_back(Welcome{1000, 3});
  v.push_back(Welcome{0, ~0ULL});
  v.push_back(TablePush{range_table(~0ULL), modulo_table(~0ULL - 1), 60000});
  v.push_back(TablePush{modulo_table(1), std::nullopt, 0});
  for (auto a :
       {frame::PurgeAction::kStatus, frame::PurgeAction::kNotOwned, frame::PurgeAction::kOlderThan,
        frame::PurgeAction::kAll, frame::PurgeAction::kCancel}) {
    v.push_back(PurgeCommand{a, a == frame::PurgeAction::kOlderThan ? 3600u : 0u});
  }
  v.push_back(PurgeCommand{frame::PurgeAction::kAll, 0, 1764615094001});
  v.push_back(PurgeCommand{frame::PurgeAction::kOlderThan, 60, ~0ULL});
  v.push_back(StreamReport{});
  for (auto state : kStreamStates) {
    v.push_back(StreamReport{
        9, state, 512, 1024, 300, 12000, 4500, 2, {{"hash2", 200}, {"hash3", 100}}, {}});
  }
  v.push_back(StreamReport{~0ULL,
                           StreamState::kDone,
                           ~0ULL,
                           ~0ULL,
                           ~0ULL,
                           ~0ULL,
                           ~0ULL,
                           ~0ULL,
                           {{"\xc3\xa9t\xc3\xa9 \"q\"", ~0ULL}},
                           {}});
  v.push_back(StreamCommand{StreamAction::kStart, 7, {}});
  v.push_back(StreamCommand{StreamAction::kCancel, 0, {}});
  v.push_back(StreamCommand{StreamAction::kStart, ~0ULL, {}});
  // Replicas (issue 14): refills.
  v.push_back(StreamCommand{StreamAction::kStart, 8, {"hash2", "hash3"}});
  v.push_back(StreamReport{8, StreamState::kDone, 1, 1, 1, 0, 0, 0, {{"hash2", 1}}, {"hash2"}});
  v.push_back(FillCommand{true});
  v.push_back(FillCommand{false});
  v.push_back(Register{Role::kHash, "hash1", "127.0.0.1:7001", 4, 2, 99, true, false});
  v.push_back(Register{Role::kHash, "hash1", "127.0.0.1:7001", 4, 2, 99, false, true});
  v.push_back(Refused{"address 0.0.0.0:7001 is unspecified \"quoted\"", ""});
  v.push_back(Refused{"", ""});
  v.push_back(Refused{"a standby", "10.0.0.2:7000"});
  return v;
}

std::vector<uint8_t> encode(const Message& m) {
  std::vector<uint8_t> out;
  append_message(m, out);
  return out;
}

// One frame holding `json` verbatim.
std::vector<uint8_t> frame_of(std::string_view json) {
  std::vector<uint8_t> out(4 + json.size());
  const auto n = static_cast<uint32_t>(json.size());
  out[0] = static_cast<uint8_t>(n >> 24);
  out[1] = static_cast<uint8_t>(n >> 16);
  out[2] = static_cast<uint8_t>(n >> 8);
  out[3] = static_cast<uint8_t>(n);
  if (!json.empty()) std::memcpy(out.data() + 4, json.data(), json.size());
  return out;
}

struct Decoded {
  DecodeStatus status;
  Message message;
  size_t consumed;
  std::string error;
};

Decoded decode(std::span<const uint8_t> in) {
  Decoded d{};
  d.consumed = 12345;
  d.status = next_message(in, d.message, d.consumed, d.error);
  return d;
}

Decoded decode_json(std::string_view json) { return decode(frame_of(json)); }

}  // namespace

TEST_CASE("control_protocol: every message round-trips") {
  for (const Message& m : samples()) {
    CAPTURE(type_name(m));
    const auto buf = encode(m);
    const Decoded d = decode(buf);
    REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
    CHECK(d.consumed == buf.size());
    CHECK(d.message == m);
    CHECK(encode(d.message) == buf);
  }
}

TEST_CASE("control_protocol: golden bytes") {
  const auto ack = encode(Ack{7});
  const std::string body = R"({"type":"ack","version":7})";
  CHECK(ack == frame_of(body));
  CHECK(ack[3] == body.size());

  const auto reg = encode(Register{Role::kHash, "hash1", "127.0.0.1:7001", 4, 2, 99, false, false});
  CHECK(reg == frame_of(R"({"type":"register","role":"hash","name":"hash1",)"
                        R"("address":"127.0.0.1:7001","shards":4,"version":2,"pid":99})"));
  const auto purge = encode(PurgeCommand{frame::PurgeAction::kOlderThan, 60});
  CHECK(purge == frame_of(R"({"type":"purge","action":"older_than","age_s":60,"id":0})"));
  CHECK(encode(PurgeCommand{frame::PurgeAction::kAll, 0, 42}) ==
        frame_of(R"({"type":"purge","action":"all","age_s":0,"id":42})"));
  CHECK(encode(StreamCommand{StreamAction::kCancel, 3, {}}) ==
        frame_of(R"({"type":"stream","action":"cancel","version":3})"));
  CHECK(encode(StreamReport{4, StreamState::kRunning, 1, 2, 3, 4, 5, 6, {{"h", 7}}, {}}) ==
        frame_of(R"({"version":4,"state":"running","scanned":1,"total":2,"sent":3,"rate":4,)"
                 R"("eta_ms":5,"restarts":6,"targets":[{"name":"h","records":7}],)"
                 R"("type":"stream_report"})"));
  CHECK(encode(Refused{"no", ""}) == frame_of(R"({"type":"refused","reason":"no"})"));
}

TEST_CASE("control_protocol: messages written by hand decode") {
  auto d = decode_json(R"({"type":"welcome","heartbeat_ms":250,"config_version":9})");
  REQUIRE(d.status == DecodeStatus::kOk);
  CHECK(d.message == Message(Welcome{250, 9}));

  // Members in any order, whitespace, "previous" absent means null.
  d = decode_json(R"( { "grace_ms" : 5, "type" : "table",
      "table": {"version": 4, "mode": "modulo",
                "servers": [{"name": "hash1", "address": "127.0.0.1:7001", "shards": 4}]} } )");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  const auto& push = std::get<TablePush>(d.message);
  CHECK(push.table.version == 4);
  CHECK(push.table.servers.at(0).shards == 4);
  CHECK_FALSE(push.previous);
  CHECK(push.grace_ms == 5);

  d = decode_json(R"({"type":"table","table":)" + table_to_json(range_table(5)) +
                  R"(,"previous":null,"grace_ms":0})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(std::get<TablePush>(d.message).table == range_table(5));
}

TEST_CASE("control_protocol: unknown members are ignored") {
  auto d =
      decode_json(R"({"type":"ack","version":3,"future":{"nested":[1,2,3]},"zone":"eu","x":null})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.message == Message(Ack{3}));

  d = decode_json(R"({"type":"purge_report","shards":[{"shard":2,"state":"running",)"
                  R"("kind":"not_owned","scanned":1,"total":2,"deleted":0,"rate":1.5}],"eta":3})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  const auto& report = std::get<PurgeReport>(d.message);
  REQUIRE(report.shards.size() == 1);
  CHECK(report.shards[0] ==
        PurgeShard{2, frame::PurgeState::kRunning, frame::PurgeAction::kNotOwned, 1, 2, 0});
}

TEST_CASE("control_protocol: purge ids are optional, for nodes that do not know them") {
  // A purge without "id" (an older config server) is id 0; so is a report shard without one.
  auto d = decode_json(R"({"type":"purge","action":"all","age_s":0})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.message == Message(PurgeCommand{frame::PurgeAction::kAll, 0, 0}));
  d = decode_json(R"({"type":"purge","action":"not_owned","age_s":0,"id":77})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(std::get<PurgeCommand>(d.message).id == 77);
  d = decode_json(R"({"type":"purge_report","shards":[{"shard":0,"state":"done","kind":"all",)"
                  R"("scanned":1,"total":1,"deleted":1,"id":9},{"shard":1,"state":"done",)"
                  R"("kind":"all","scanned":1,"total":1,"deleted":1}]})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  const auto& report = std::get<PurgeReport>(d.message);
  REQUIRE(report.shards.size() == 2);
  CHECK(report.shards[0].id == 9);
  CHECK(report.shards[1].id == 0);
  CHECK(purge_shard_json(report.shards[0]).at("id").to_number<uint64_t>() == 9);
}

TEST_CASE("control_protocol: stream messages written by hand decode") {
  auto d = decode_json(R"({"type":"stream","action":"start","version":12,"future":1})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.message == Message(StreamCommand{StreamAction::kStart, 12, {}}));
  d = decode_json(R"({"type":"stream_report","version":3,"state":"done","scanned":10,)"
                  R"("total":10,"sent":4,"rate":0,"eta_ms":0,"restarts":0,"targets":[],"x":[]})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.message == Message(StreamReport{3, StreamState::kDone, 10, 10, 4, 0, 0, 0, {}, {}}));
  // stream_report_json is the report without "type", as the admin API shows it.
  const boost::json::object o = stream_report_json(
      StreamReport{3, StreamState::kCancelled, 1, 2, 3, 4, 5, 6, {{"h", 1}}, {}});
  CHECK_FALSE(o.contains("type"));
  CHECK(o.at("state").as_string() == "cancelled");
  CHECK(o.at("targets").as_array().at(0).as_object().at("records").to_number<uint64_t>() == 1);
}

TEST_CASE("control_protocol: refill members written by hand decode, and are optional") {
  auto d = decode_json(R"({"type":"stream","action":"start","version":12,"lost":["hash2"]})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.message == Message(StreamCommand{StreamAction::kStart, 12, {"hash2"}}));
  d = decode_json(R"({"type":"fill","filling":true})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.message == Message(FillCommand{true}));
  d = decode_json(R"({"type":"fill","filling":1})");
  CHECK(d.status == DecodeStatus::kBadMessage);
  CHECK(d.error.find("filling") != std::string::npos);
  d = decode_json(R"({"type":"register","role":"hash","name":"h","address":"127.0.0.1:1",)"
                  R"("shards":1,"version":0,"pid":5,"fresh":true})");
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(std::get<Register>(d.message).fresh);
  CHECK_FALSE(std::get<Register>(d.message).filling);
  // Without them (an older node), and written only when set.
  CHECK(encode(Register{Role::kHash, "h", "127.0.0.1:1", 1, 0, 5, false, false}) ==
        frame_of(R"({"type":"register","role":"hash","name":"h","address":"127.0.0.1:1",)"
                 R"("shards":1,"version":0,"pid":5})"));
  CHECK(encode(FillCommand{false}) == frame_of(R"({"type":"fill","filling":false})"));
}

TEST_CASE("control_protocol: a stream split into pieces of every size decodes the same") {
  const auto messages = samples();
  std::vector<uint8_t> stream;
  for (const Message& m : messages) append_message(m, stream);
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    std::vector<uint8_t> pending;
    size_t fed = 0, decoded = 0;
    bool ok = true;
    while (fed < stream.size() && ok) {
      const size_t n = std::min(piece, stream.size() - fed);
      pending.insert(pending.end(), stream.begin() + fed, stream.begin() + fed + n);
      fed += n;
      size_t off = 0;
      for (;;) {
        const Decoded d = decode(std::span(pending).subspan(off));
        if (d.status == DecodeStatus::kNeedMore) {
          ok = d.consumed == 0;
          break;
        }
        if (d.status != DecodeStatus::kOk || decoded >= messages.size() ||
            !(d.message == messages[decoded])) {
          ok = false;
          break;
        }
        ++decoded;
        off += d.consumed;
      }
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(off));
    }
    CAPTURE(piece);
    REQUIRE(ok);  // one REQUIRE per piece size: thousands of CHECKs would drown a failure
    REQUIRE(decoded == messages.size());
    REQUIRE(pending.empty());
  }
}

TEST_CASE("control_protocol: every truncation needs more bytes and consumes nothing") {
  for (const Message& m : samples()) {
    const auto buf = encode(m);
    for (size_t len = 0; len < buf.size(); ++len) {
      const Decoded d = decode(std::span(buf).first(len));
      if (d.status != DecodeStatus::kNeedMore || d.consumed != 0) {
        FAIL("truncated ", type_name(m), " to ", len, " bytes: ", to_string(d.status));
      }
    }
  }
}

TEST_CASE("control_protocol: a message after another is left for the next call") {
  std::vector<uint8_t> two = encode(Ack{1});
  const size_t first = two.size();
  append_message(Ack{2}, two);
  Decoded d = decode(two);
  REQUIRE(d.status == DecodeStatus::kOk);
  CHECK(d.consumed == first);
  CHECK(d.message == Message(Ack{1}));
  d = decode(std::span(two).subspan(first));
  REQUIRE(d.status == DecodeStatus::kOk);
  CHECK(d.message == Message(Ack{2}));
}

TEST_CASE("control_protocol: oversized frames are refused from the length prefix") {
  std::vector<uint8_t> huge = {0x01, 0x00, 0x00, 0x01};  // 16 MiB + 1
  Decoded d = decode(huge);
  CHECK(d.status == DecodeStatus::kTooLarge);
  CHECK(d.consumed == 0);
  CHECK(d.error.find("16777217") != std::string::npos);
  huge = {0xff, 0xff, 0xff, 0xff, '{'};
  CHECK(decode(huge).status == DecodeStatus::kTooLarge);
  const std::vector<uint8_t> largest = {0x01, 0x00, 0x00, 0x00, '{'};  // exactly the limit
  d = decode(largest);
  CHECK(d.status == DecodeStatus::kNeedMore);
  CHECK(d.consumed == 0);
}

TEST_CASE("control_protocol: a receiver's lower limit refuses longer frames from the prefix") {
  constexpr uint32_t kLimit = 64 * 1024;
  Message m;
  size_t used = 99;
  std::string error;
  const std::vector<uint8_t> over = {0x00, 0x01, 0x00, 0x01, '{'};  // 64 KiB + 1
  CHECK(next_message(over, m, used, error, kLimit) == DecodeStatus::kTooLarge);
  CHECK(used == 0);
  CHECK(error.find("65537") != std::string::npos);
  CHECK(error.find("65536") != std::string::npos);
  const std::vector<uint8_t> at = {0x00, 0x01, 0x00, 0x00, '{'};  // exactly the limit
  CHECK(next_message(at, m, used, error, kLimit) == DecodeStatus::kNeedMore);
  // A limit above the protocol's is the protocol's.
  const std::vector<uint8_t> huge = {0x01, 0x00, 0x00, 0x01};
  CHECK(next_message(huge, m, used, error, 0xffffffffu) == DecodeStatus::kTooLarge);

  // drain_messages (with `error` still holding the last one: it is cleared, not taken for a new
  // failure): whole messages under the limit go through; a longer prefix stops the stream
  // before its body is buffered, and the buffer does not grow for it.
  StreamBuffer in(4096, 4 + kLimit);
  std::vector<uint8_t> bytes;
  append_message(Ack{7}, bytes);
  bytes.insert(bytes.end(), over.begin(), over.end());
  const auto space = in.space();
  std::memcpy(space.data(), bytes.data(), bytes.size());
  in.commit(bytes.size());
  std::vector<Message> got;
  const DecodeStatus st = drain_messages(
      in, error,
      [&](const Message& x) {
        got.push_back(x);
        return true;
      },
      kLimit);
  CHECK(st == DecodeStatus::kTooLarge);
  CHECK(error.find("65537") != std::string::npos);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == Message(Ack{7}));
  CHECK(in.capacity() == 4096);
}

TEST_CASE("control_protocol: a message at the size limit decodes") {
  const std::string head = R"({"type":"ack","version":1,"pad":")", tail = "\"}";
  const std::string json =
      head + std::string(kMaxMessageSize - head.size() - tail.size(), 'x') + tail;
  REQUIRE(json.size() == kMaxMessageSize);
  const Decoded d = decode_json(json);
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(d.consumed == kMaxMessageSize + 4);
  CHECK(d.message == Message(Ack{1}));
}

TEST_CASE("control_protocol: bad JSON") {
  for (const char* text : {"", "{", "not json", "{\"type\":\"ack\",\"version\":1}x",
                           "{\"type\":\"ack\",\"version\":1,}", "{\"type\":\"ack\" \"version\":1}",
                           "{\"type\":\"ack\",\"version\":01}", "/* c */ {}",
                           "{\"type\":\"ack\",\"name\":\"\xff\xfe\"}", "\xef\xbb\xbf{}"}) {
    CAPTURE(text);
    const Decoded d = decode_json(text);
    CHECK(d.status == DecodeStatus::kBadJson);
    CHECK(d.consumed == 4 + std::strlen(text));
    CHECK_FALSE(d.error.empty());
  }
}

TEST_CASE("control_protocol: missing members and wrong types are named") {
  struct Case {
    std::string json;
    std::string error;  // the whole expected error
  };
  const std::string u64_rule = "must be an integer between 0 and 18446744073709551615";
  const std::string u32_rule = "must be an integer between 0 and 4294967295";
  const std::string purge_actions = R"("status", "not_owned", "older_than", "all" or "cancel")";
  const std::string table_a = R"({"version":1,"mode":"modulo","servers":[{"name":"a"}]})";
  const std::vector<Case> cases = {
      {"[]", "a message must be a JSON object, not an array"},
      {"42", "a message must be a JSON object, not a number"},
      {"{}", "\"type\" is missing"},
      {R"({"type":1})", "\"type\" must be a string, not a number"},
      {R"({"type":"hello"})", "unknown message type \"hello\""},
      {R"({"type":"ack"})", "ack: \"version\" is missing"},
      {R"({"type":"ack","version":"1"})", "ack: \"version\" " + u64_rule + ", not a string"},
      {R"({"type":"ack","version":-1})", "ack: \"version\" " + u64_rule + " (got -1)"},
      {R"({"type":"ack","version":1.0})", "ack: \"version\" " + u64_rule + " (got 1E0)"},
      {R"({"type":"ack","version":1e3})", "ack: \"version\" " + u64_rule + " (got 1E3)"},
      {R"({"type":"ack","version":18446744073709551616})",
       "ack: \"version\" " + u64_rule + " (got 1.8446744073709552E19)"},
      {R"({"type":"ack","version":null})", "ack: \"version\" " + u64_rule + ", not null"},
      {R"({"type":"register","role":"monitor","name":"a","address":"b","shards":0,"version":0,)"
       R"("pid":1})",
       "register: \"role\" must be \"hash\" or \"login\" (got \"monitor\")"},
      {R"({"type":"register","role":"hash","address":"b","shards":0,"version":0,"pid":1})",
       "register: \"name\" is missing"},
      {R"({"type":"register","role":"hash","name":"a","address":7,"shards":0,"version":0,)"
       R"("pid":1})",
       "register: \"address\" must be a string, not a number"},
      {R"({"type":"register","role":"hash","name":"a","address":"b","shards":4294967296,)"
       R"("version":0,"pid":1})",
       "register: \"shards\" " + u32_rule + " (got 4294967296)"},
      {R"({"type":"register","role":"hash","name":"a","address":"b","shards":1,"version":0})",
       "register: \"pid\" is missing"},
      {R"({"type":"heartbeat","version":1})", "heartbeat: \"stats\" is missing"},
      {R"({"type":"heartbeat","version":1,"stats":[]})",
       "heartbeat: \"stats\" must be an object, not an array"},
      {R"({"type":"heartbeat","version":1,"stats":{"a":1,"b":"x"}})",
       "heartbeat: \"stats.b\" must be a number, not a string"},
      {R"({"type":"heartbeat","version":1,"stats":{"a":{}}})",
       "heartbeat: \"stats.a\" must be a number, not an object"},
      {R"({"type":"heartbeat","version":1,"stats":{"inf":1e400}})",
       "heartbeat: \"stats.inf\" must be a finite number (got Infinity)"},
      {R"({"type":"purge_report"})", "purge_report: \"shards\" is missing"},
      {R"({"type":"purge_report","shards":{}})",
       "purge_report: \"shards\" must be an array, not an object"},
      {R"({"type":"purge_report","shards":[1]})",
       "purge_report: \"shards[0]\" must be an object, not a number"},
      {R"({"type":"purge_report","shards":[{"shard":0,"state":"idle","kind":"status",)"
       R"("scanned":0,"total":0,"deleted":0},{"shard":1,"state":"busy","kind":"status",)"
       R"("scanned":0,"total":0,"deleted":0}]})",
       "purge_report: \"shards[1].state\" must be \"idle\", \"running\", \"done\" or "
       "\"cancelled\" (got \"busy\")"},
      {R"({"type":"purge_report","shards":[{"shard":0,"state":"idle","kind":"status",)"
       R"("scanned":0,"total":0}]})",
       "purge_report: \"shards[0].deleted\" is missing"},
      {R"({"type":"purge_report","shards":[{"shard":0,"state":"idle","kind":"purge",)"
       R"("scanned":0,"total":0,"deleted":0}]})",
       "purge_report: \"shards[0].kind\" must be " + purge_actions + " (got \"purge\")"},
      {R"({"type":"welcome","heartbeat_ms":1000})", "welcome: \"config_version\" is missing"},
      {R"({"type":"welcome","heartbeat_ms":4294967296,"config_version":1})",
       "welcome: \"heartbeat_ms\" " + u32_rule + " (got 4294967296)"},
      {R"({"type":"table","grace_ms":0})", "table: \"table\" is missing"},
      {R"({"type":"table","table":null,"grace_ms":0})",
       "table: \"table\" must be an object, not null"},
      {R"({"type":"table","table":{"version":1,"mode":"modulo","servers":[]},"grace_ms":0})",
       "table: \"table\" is not a valid table: the table has no servers"},
      {R"({"type":"table","table":{"version":1,"mode":"modulo","servers":[{"name":"a"}],)"
       R"("color":1},"grace_ms":0})",
       "table: unknown key \"table.color\" (expected version, mode, modulo_hash, replicas, "
       "servers, "
       "ranges)"},
      {R"({"type":"table","table":{"version":1,"mode":"modulo","servers":[{"name":"a",)"
       R"("shards":"4"}]},"grace_ms":0})",
       "table: \"table.servers[0].shards\" " + u32_rule + ", not a string"},
      {R"({"type":"table","table":)" + table_a + R"(,"previous":[],"grace_ms":0})",
       "table: \"previous\" must be an object, not an array"},
      {R"({"type":"table","table":)" + table_a +
           R"(,"previous":{"version":0,"mode":"range","servers":[{"name":"a"}]},"grace_ms":0})",
       "table: \"previous\" is not a valid table: range mode needs ranges covering the ids "
       "0-18446744073709551615, and there are none"},
      {R"({"type":"table","table":)" + table_a + "}", "table: \"grace_ms\" is missing"},
      {R"({"type":"purge","age_s":0})", "purge: \"action\" is missing"},
      {R"({"type":"purge","action":"everything","age_s":0})",
       "purge: \"action\" must be " + purge_actions + " (got \"everything\")"},
      {R"({"type":"purge","action":"all","age_s":-3})",
       "purge: \"age_s\" " + u32_rule + " (got -3)"},
      {R"({"type":"purge","action":"all"})", "purge: \"age_s\" is missing"},
      {R"({"type":"purge","action":"all","age_s":0,"id":"1"})",
       "purge: \"id\" " + u64_rule + ", not a string"},
      {R"({"type":"purge_report","shards":[{"shard":0,"state":"idle","kind":"status",)"
       R"("scanned":0,"total":0,"deleted":0,"id":-1}]})",
       "purge_report: \"shards[0].id\" " + u64_rule + " (got -1)"},
      {R"({"type":"stream","version":1})", "stream: \"action\" is missing"},
      {R"({"type":"stream","action":"pause","version":1})",
       "stream: \"action\" must be \"start\" or \"cancel\" (got \"pause\")"},
      {R"({"type":"stream","action":"start"})", "stream: \"version\" is missing"},
      {R"({"type":"stream_report","state":"done","scanned":0,"total":0,"sent":0,"rate":0,)"
       R"("eta_ms":0,"restarts":0,"targets":[]})",
       "stream_report: \"version\" is missing"},
      {R"({"type":"stream_report","version":1,"state":"finished","scanned":0,"total":0,)"
       R"("sent":0,"rate":0,"eta_ms":0,"restarts":0,"targets":[]})",
       "stream_report: \"state\" must be \"idle\", \"running\", \"done\" or \"cancelled\" "
       "(got \"finished\")"},
      {R"({"type":"stream_report","version":1,"state":"done","scanned":0,"total":0,"sent":0,)"
       R"("rate":0,"eta_ms":0,"restarts":0})",
       "stream_report: \"targets\" is missing"},
      {R"({"type":"stream_report","version":1,"state":"done","scanned":0,"total":0,"sent":0,)"
       R"("rate":0,"eta_ms":0,"restarts":0,"targets":[{"name":"h"}]})",
       "stream_report: \"targets[0].records\" is missing"},
      {R"({"type":"stream_report","version":1,"state":"done","scanned":0,"total":0,"sent":0,)"
       R"("rate":0.5,"eta_ms":0,"restarts":0,"targets":[]})",
       "stream_report: \"rate\" " + u64_rule + " (got 5E-1)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.json);
    const Decoded d = decode_json(c.json);
    CHECK(d.status == DecodeStatus::kBadMessage);
    CHECK(d.consumed == 4 + c.json.size());
    CHECK(d.error == c.error);
  }
}

TEST_CASE("control_protocol: large versions are exact") {
  for (uint64_t v :
       {0ULL, 1ULL, (1ULL << 53) + 1, (1ULL << 63) - 1, 1ULL << 63, ~0ULL - 1, ~0ULL}) {
    CAPTURE(v);
    const Decoded d = decode(encode(Ack{v}));
    REQUIRE(d.status == DecodeStatus::kOk);
    CHECK(std::get<Ack>(d.message).version == v);
  }
  const Decoded d = decode_json(R"({"type":"ack","version":18446744073709551615})");
  REQUIRE(d.status == DecodeStatus::kOk);
  CHECK(std::get<Ack>(d.message).version == ~0ULL);
}

TEST_CASE("control_protocol: stats that JSON cannot carry are left out when encoding") {
  Heartbeat hb{1,
               boost::json::object{{"ok", 1},
                                   {"inf", std::numeric_limits<double>::infinity()},
                                   {"nan", std::numeric_limits<double>::quiet_NaN()},
                                   {"text", "x"},
                                   {"nested", boost::json::object{{"a", 1}}},
                                   {"null", nullptr},
                                   {"half", 0.5}},
               {}};
  const Decoded d = decode(encode(hb));
  REQUIRE_MESSAGE(d.status == DecodeStatus::kOk, d.error);
  CHECK(std::get<Heartbeat>(d.message).stats == boost::json::object{{"ok", 1}, {"half", 0.5}});
}

TEST_CASE("control_protocol: a heartbeat's held writes are counts by server name") {
  for (const char* bad : {R"({"type":"heartbeat","version":1,"stats":{},"held_writes":[]})",
                          R"({"type":"heartbeat","version":1,"stats":{},"held_writes":{"a":-1}})",
                          R"({"type":"heartbeat","version":1,"stats":{},"held_writes":{"a":"1"}})",
                          R"({"type":"heartbeat","version":1,"stats":{},"held_writes":{"":1}})"}) {
    CAPTURE(bad);
    const Decoded d = decode_json(bad);
    CHECK(d.status == DecodeStatus::kBadMessage);
    CHECK_FALSE(d.error.empty());
  }
  const Decoded ok = decode_json(R"({"type":"heartbeat","version":1,"stats":{}})");
  REQUIRE(ok.status == DecodeStatus::kOk);
  CHECK(std::get<Heartbeat>(ok.message).held_writes.empty());  // an older login server's
}

TEST_CASE("control_protocol: names of the vocabulary") {
  CHECK(std::string(to_string(Role::kLogin)) == "login");
  CHECK(parse_role("hash") == Role::kHash);
  CHECK_FALSE(parse_role("Hash"));
  CHECK(parse_purge_action("not_owned") == frame::PurgeAction::kNotOwned);
  CHECK_FALSE(parse_purge_action(""));
  CHECK(parse_purge_state("cancelled") == frame::PurgeState::kCancelled);
  CHECK(std::string(purge_state_name(frame::PurgeState::kDone)) == "done");
  CHECK(std::string(type_name(Message(PurgeCommand{}))) == "purge");
  CHECK(std::string(type_name(Message(TablePush{}))) == "table");
  CHECK(std::string(type_name(Message(Refused{}))) == "refused");
  CHECK(std::string(type_name(Message(StreamReport{}))) == "stream_report");
  CHECK(std::string(type_name(Message(StreamCommand{}))) == "stream");
  CHECK(std::string(stream_state_name(StreamState::kCancelled)) == "cancelled");
  CHECK(std::string(stream_action_name(StreamAction::kStart)) == "start");
  CHECK(std::string(to_string(DecodeStatus::kBadJson)) == "invalid JSON");
}
