// Every path of a login request, driven without a socket: the flow gets datagrams, answers,
// failures and the time from the test, and the test checks the actions it returns.
#include "login_server/request_flow.h"

#include <doctest/doctest.h>

#include "common/shard_map.h"

#include <set>
#include <string>
#include <vector>

namespace imhash {
namespace {

using client::Op;
using client::Status;
using frame::FrameStatus;
using frame::FrameType;

constexpr int64_t kMs = 1'000'000;

// Links are usable unless the test blocks their server by name.
class FakeLinks final : public LinkView {
 public:
  bool can_send(const LinkTarget& t) const override { return !blocked.contains(t.server->name); }
  std::set<std::string> blocked;
};

// Range tables over hash1..hash3: ids below 1000 on `low`, the rest on hash3.
Table table(uint64_t version, const std::string& low) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRange;
  for (int i = 1; i <= 3; ++i) {
    t.servers.push_back({"hash" + std::to_string(i), "127.0.0.1:" + std::to_string(7000 + i), 2, 1});
  }
  t.ranges = {{0, 999, low}, {1000, UINT64_MAX, "hash3"}};
  return t;
}

// A routing state: `now` current, and the tables before it still in their grace period until
// `grace_until`.
std::shared_ptr<const RoutingState> routing(const Table& now, std::vector<Table> before = {},
                                            int64_t grace_until = 0) {
  auto st = std::make_shared<RoutingState>();
  st->current = Router::compile(now);
  for (auto& t : before) st->earlier.push_back({Router::compile(std::move(t)), grace_until});
  return st;
}

ClientAddr client_addr() {
  ClientAddr a;
  a.u.v4.sin_family = AF_INET;
  a.u.v4.sin_port = htons(40000);
  a.u.v4.sin_addr.s_addr = htonl(0x7f000001);
  a.len = sizeof(sockaddr_in);
  return a;
}

const Endpoint kUserEndpoint = Endpoint::v4(0x0a000001, 5555);

std::vector<uint8_t> datagram(Op op, uint64_t user, uint32_t request_id = 7) {
  client::Message m;
  m.op = op;
  m.request_id = request_id;
  m.user_id = user;
  if (op == Op::kLogin || op == Op::kHeartbeat) m.endpoint = kUserEndpoint;
  std::vector<uint8_t> out(256);
  out.resize(client::encode_request(m, out));
  return out;
}

client::Message reply_of(const FlowAction& a) {
  REQUIRE(a.kind == FlowAction::kReply);
  auto d = client::decode_response({a.reply, a.reply_size});
  REQUIRE(d.error == client::DecodeError::kOk);
  return d.msg;
}

frame::Response answer(FrameStatus status, uint64_t version = 2) {
  frame::Response r;
  r.status = status;
  r.table_version = version;
  return r;
}

frame::Response found(uint32_t age = 30) {
  frame::Response r = answer(FrameStatus::kOk);
  r.endpoint = kUserEndpoint;
  r.age_seconds = age;
  return r;
}

// A flow with its links, counters and action list.
struct Harness {
  explicit Harness(std::shared_ptr<const RoutingState> r = nullptr) : flow(settings, links, counters) {
    if (r) set(std::move(r));
  }
  void set(std::shared_ptr<const RoutingState> r) {
    out.clear();
    flow.set_routing(std::move(r), now, out);
  }
  std::vector<FlowAction>& request(Op op, uint64_t user) {
    out.clear();
    flow.on_datagram(datagram(op, user), client_addr(), now, 1'700'000'000, out);
    return out;
  }
  std::vector<FlowAction>& answer_with(uint64_t token, const frame::Response& r) {
    out.clear();
    flow.on_answer(token, r, now, out);
    return out;
  }
  std::vector<FlowAction>& fail_with(uint64_t token, Status s) {
    out.clear();
    flow.on_failure(token, s, now, out);
    return out;
  }

  FlowSettings settings;
  FakeLinks links;
  LoginCounters counters;
  RequestFlow flow;
  std::vector<FlowAction> out;
  int64_t now = 1000 * kMs;
};

void check_send(const FlowAction& a, const std::string& server, FrameType type, uint64_t version,
                uint8_t flags = 0) {
  REQUIRE(a.kind == FlowAction::kSend);
  CHECK(a.target.server->name == server);
  CHECK(a.frame.type == type);
  CHECK(a.frame.table_version == version);
  CHECK(a.frame.flags == flags);
}

}  // namespace

TEST_CASE("request_flow: PING and malformed datagrams are answered without a hash server") {
  Harness h(routing(table(5, "hash1")));
  auto& a = h.request(Op::kPing, 0);
  REQUIRE(a.size() == 1);
  CHECK(reply_of(a[0]).table_version == 5u);
  h.out.clear();
  h.flow.on_datagram(std::vector<uint8_t>(10, 0), client_addr(), h.now, 0, h.out);
  CHECK(h.out.empty());  // too short: dropped without a reply, counted
  CHECK(h.counters.dropped[static_cast<size_t>(DropReason::kTooShort)] == 1);
  CHECK(h.counters.received == 2);
  CHECK(h.flow.active() == 0);
}

TEST_CASE("request_flow: LOGIN goes to the owner's shard and its answer becomes the reply") {
  Harness h(routing(table(2, "hash1")));
  auto& a = h.request(Op::kLogin, 42);
  REQUIRE(a.size() == 1);
  check_send(a[0], "hash1", FrameType::kUpsert, 2);
  CHECK(a[0].frame.id == 42u);
  CHECK(a[0].frame.endpoint == kUserEndpoint);
  CHECK(a[0].target.current == 0u);
  CHECK(a[0].target.shard == shard_of(42, 2));
  CHECK(h.counters.forwarded == 1);
  const uint64_t token = a[0].token;
  h.now += 3 * kMs;
  auto& r = h.answer_with(token, answer(FrameStatus::kOk));
  REQUIRE(r.size() == 1);
  const auto reply = reply_of(r[0]);
  CHECK(reply.status == Status::kOk);
  CHECK(reply.request_id == 7u);
  CHECK(reply.endpoint == kUserEndpoint);
  CHECK(r[0].to.u.v4.sin_port == htons(40000));
  CHECK(h.counters.latency[5] == 1);  // 3 ms: the (2.5 ms, 5 ms] bucket
  CHECK(h.flow.active() == 0);
  // The token is spent: a late duplicate answer does nothing.
  CHECK(h.answer_with(token, answer(FrameStatus::kOk)).empty());
}

TEST_CASE("request_flow: each hash server status maps onto the client's") {
  Harness h(routing(table(2, "hash1")));
  SUBCASE("LOOKUP NOT_FOUND") {
    const uint64_t t = h.request(Op::kLookup, 1)[0].token;
    CHECK(reply_of(h.answer_with(t, answer(FrameStatus::kNotFound))[0]).status ==
          Status::kNotFound);
  }
  SUBCASE("LOGOUT NOT_FOUND is OK (a retried LOGOUT)") {
    const uint64_t t = h.request(Op::kLogout, 1)[0].token;
    CHECK(reply_of(h.answer_with(t, answer(FrameStatus::kNotFound))[0]).status == Status::kOk);
  }
  SUBCASE("LOOKUP OK carries the endpoint and age") {
    const uint64_t t = h.request(Op::kLookup, 1)[0].token;
    const auto m = reply_of(h.answer_with(t, found(30))[0]);
    CHECK(m.status == Status::kOk);
    CHECK(m.endpoint == kUserEndpoint);
    CHECK(m.age == 30u);
  }
  SUBCASE("WRONG_SHARD and other statuses are UNAVAILABLE") {
    const uint64_t t = h.request(Op::kHeartbeat, 1)[0].token;
    CHECK(reply_of(h.answer_with(t, answer(FrameStatus::kWrongShard))[0]).status ==
          Status::kUnavailable);
  }
  SUBCASE("a link failure is the reply's status") {
    const uint64_t t = h.request(Op::kLookup, 1)[0].token;
    CHECK(reply_of(h.fail_with(t, Status::kTimeout)[0]).status == Status::kTimeout);
    const uint64_t u = h.request(Op::kLookup, 1)[0].token;
    CHECK(reply_of(h.fail_with(u, Status::kUnavailable)[0]).status == Status::kUnavailable);
  }
  CHECK(h.flow.active() == 0);
}

TEST_CASE("request_flow: no table, or an owner that cannot be reached, is UNAVAILABLE at once") {
  Harness none;
  CHECK(reply_of(none.request(Op::kLookup, 1)[0]).status == Status::kUnavailable);
  Harness h(routing(table(2, "hash1")));
  h.links.blocked = {"hash1"};
  auto& a = h.request(Op::kLogin, 5);
  REQUIRE(a.size() == 1);
  CHECK(reply_of(a[0]).status == Status::kUnavailable);
  CHECK(h.counters.forwarded == 0);
  // Ids of other servers are unaffected.
  check_send(h.request(Op::kLogin, 5000)[0], "hash3", FrameType::kUpsert, 2);
}

TEST_CASE("request_flow: MOVED asks for the newer table, parks, and retries once under it") {
  Harness h(routing(table(1, "hash1")));
  const uint64_t t = h.request(Op::kLogin, 10)[0].token;
  auto& a = h.answer_with(t, answer(FrameStatus::kMoved, 2));
  REQUIRE(a.size() == 1);
  CHECK(a[0].kind == FlowAction::kNeedTable);
  CHECK(a[0].version == 2u);
  CHECK(h.flow.parked() == 1);
  CHECK(h.counters.moved_retries == 1);
  // The newer table arrives: the request goes out again, to its new owner.
  h.set(routing(table(2, "hash2"), {table(1, "hash1")}, h.now + 1000 * kMs));
  REQUIRE(h.out.size() == 1);
  check_send(h.out[0], "hash2", FrameType::kUpsert, 2);
  CHECK(h.flow.parked() == 0);
  // A second MOVED is not retried again: the client hears UNAVAILABLE.
  auto& b = h.answer_with(h.out[0].token, answer(FrameStatus::kMoved, 3));
  REQUIRE(b.size() == 2);
  CHECK(b[0].kind == FlowAction::kNeedTable);
  CHECK(reply_of(b[1]).status == Status::kUnavailable);
  CHECK(h.flow.active() == 0);
}

TEST_CASE("request_flow: MOVED from a version we already have retries at once") {
  Harness h(routing(table(1, "hash1")));
  const uint64_t t = h.request(Op::kLookup, 10)[0].token;
  h.set(routing(table(2, "hash2")));  // the push arrived while the request was out
  auto& a = h.answer_with(t, answer(FrameStatus::kMoved, 2));
  REQUIRE(a.size() == 1);
  check_send(a[0], "hash2", FrameType::kGet, 2);
  CHECK(h.flow.parked() == 0);
}

TEST_CASE("request_flow: a parked request times out when its table does not come") {
  Harness h(routing(table(1, "hash1")));
  const uint64_t t = h.request(Op::kLookup, 10)[0].token;
  h.answer_with(t, answer(FrameStatus::kMoved, 2));
  h.out.clear();
  h.flow.tick(h.now + h.settings.park_ns - 1, h.out);
  CHECK(h.out.empty());
  h.flow.tick(h.now + h.settings.park_ns, h.out);
  REQUIRE(h.out.size() == 1);
  CHECK(reply_of(h.out[0]).status == Status::kTimeout);
  CHECK(h.flow.active() == 0);
}

TEST_CASE("request_flow: MOVED beyond the parking limit is UNAVAILABLE") {
  Harness h(routing(table(1, "hash1")));
  h.settings.max_parked = 1;
  const uint64_t t1 = h.request(Op::kLookup, 10)[0].token;
  const uint64_t t2 = h.request(Op::kLookup, 11)[0].token;
  h.answer_with(t1, answer(FrameStatus::kMoved, 2));
  auto& a = h.answer_with(t2, answer(FrameStatus::kMoved, 2));
  REQUIRE(a.size() == 2);
  CHECK(reply_of(a[1]).status == Status::kUnavailable);
  CHECK(h.flow.parked() == 1);
}

TEST_CASE("request_flow: during a grace period a miss is read at the earlier owner and repaired") {
  Harness h;
  h.set(routing(table(2, "hash2"), {table(1, "hash1")}, h.now + 1000 * kMs));
  auto& first = h.request(Op::kLookup, 10);
  check_send(first[0], "hash2", FrameType::kGet, 2);
  SUBCASE("hit: the reply, and a copy to the owner that does not overwrite a newer write") {
    auto& fb = h.answer_with(first[0].token, answer(FrameStatus::kNotFound));
    REQUIRE(fb.size() == 1);
    check_send(fb[0], "hash1", FrameType::kGet, 1, frame::kFlagAnyOwner);
    CHECK(h.counters.fallback_reads == 1);
    auto& hit = h.answer_with(fb[0].token, found(30));
    REQUIRE(hit.size() == 2);
    check_send(hit[0], "hash2", FrameType::kUpsert, 2, frame::kFlagIfAbsent);
    CHECK(hit[0].frame.endpoint == kUserEndpoint);
    CHECK(hit[0].frame.age_seconds == 30u);  // the copy keeps the record's age
    CHECK(reply_of(hit[1]).status == Status::kOk);
    CHECK(reply_of(hit[1]).endpoint == kUserEndpoint);
    CHECK(h.counters.fallback_hits == 1);
    CHECK(h.counters.read_repairs == 1);
    CHECK(h.flow.active() == 1);  // the repair, which nobody waits for
    CHECK(h.answer_with(hit[0].token, answer(FrameStatus::kOk)).empty());
    CHECK(h.flow.active() == 0);
  }
  SUBCASE("miss there too: NOT_FOUND") {
    auto& fb = h.answer_with(first[0].token, answer(FrameStatus::kNotFound));
    auto& miss = h.answer_with(fb[0].token, answer(FrameStatus::kNotFound, 1));
    REQUIRE(miss.size() == 1);
    CHECK(reply_of(miss[0]).status == Status::kNotFound);
    CHECK(h.counters.read_repairs == 0);
  }
  SUBCASE("the earlier owner cannot be reached: NOT_FOUND at once") {
    h.links.blocked = {"hash1"};
    auto& miss = h.answer_with(first[0].token, answer(FrameStatus::kNotFound));
    REQUIRE(miss.size() == 1);
    CHECK(reply_of(miss[0]).status == Status::kNotFound);
  }
  SUBCASE("a repair that fails is dropped silently") {
    auto& fb = h.answer_with(first[0].token, answer(FrameStatus::kNotFound));
    auto& hit = h.answer_with(fb[0].token, found());
    CHECK(h.fail_with(hit[0].token, Status::kTimeout).empty());
    CHECK(h.flow.active() == 0);
  }
}

TEST_CASE("request_flow: after the grace period a miss is final, and unmoved ids never fall back") {
  Harness h;
  h.set(routing(table(2, "hash2"), {table(1, "hash1")}, h.now + 10 * kMs));
  const uint64_t t = h.request(Op::kLookup, 5000)[0].token;  // hash3 under both tables
  CHECK(reply_of(h.answer_with(t, answer(FrameStatus::kNotFound))[0]).status ==
        Status::kNotFound);
  h.now += 10 * kMs;
  const uint64_t u = h.request(Op::kLookup, 10)[0].token;
  CHECK(reply_of(h.answer_with(u, answer(FrameStatus::kNotFound))[0]).status ==
        Status::kNotFound);
  CHECK(h.counters.fallback_reads == 0);
}

TEST_CASE("request_flow: LOGOUT during a grace period deletes the old copies first") {
  Harness h;
  // Two moves in a row: hash1 (v1) -> hash2 (v2) -> hash3 (v3).
  Table v3 = table(3, "hash3");
  h.set(routing(v3, {table(2, "hash2"), table(1, "hash1")}, h.now + 1000 * kMs));
  auto& a = h.request(Op::kLogout, 10);
  REQUIRE(a.size() == 1);
  check_send(a[0], "hash2", FrameType::kDelete, 2, frame::kFlagAnyOwner);
  auto& b = h.answer_with(a[0].token, answer(FrameStatus::kOk));
  check_send(b[0], "hash1", FrameType::kDelete, 1, frame::kFlagAnyOwner);
  auto& c = h.answer_with(b[0].token, answer(FrameStatus::kNotFound));
  check_send(c[0], "hash3", FrameType::kDelete, 3);
  auto& d = h.answer_with(c[0].token, answer(FrameStatus::kOk));
  REQUIRE(d.size() == 1);
  CHECK(reply_of(d[0]).status == Status::kOk);
  CHECK(h.flow.active() == 0);
}

TEST_CASE("request_flow: a stale token or a failure after the answer does nothing") {
  Harness h(routing(table(2, "hash1")));
  const uint64_t t = h.request(Op::kLookup, 1)[0].token;
  h.answer_with(t, answer(FrameStatus::kNotFound));
  CHECK(h.fail_with(t, Status::kTimeout).empty());
  CHECK(h.answer_with(t + 12345, answer(FrameStatus::kOk)).empty());
  // The slot is reused with a new generation: the old token still finds nothing.
  const uint64_t u = h.request(Op::kLookup, 1)[0].token;
  CHECK(u != t);
  CHECK(h.fail_with(t, Status::kTimeout).empty());
  CHECK(h.flow.active() == 1);
}

TEST_CASE("request_flow: many requests in flight are answered in any order") {
  Harness h(routing(table(2, "hash1")));
  std::vector<uint64_t> tokens;
  for (uint64_t user = 0; user < 500; ++user) tokens.push_back(h.request(Op::kLookup, user)[0].token);
  CHECK(h.flow.active() == 500);
  for (size_t i = tokens.size(); i-- > 0;) {
    auto& r = h.answer_with(tokens[i], found());
    REQUIRE(r.size() == 1);
    CHECK(reply_of(r[0]).user_id == i);
  }
  CHECK(h.flow.active() == 0);
}

}  // namespace imhash
