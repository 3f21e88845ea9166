// udp_sim --history without sockets: the endpoint unique to each write, the --verify bookkeeping
// following those endpoints, and the history file's exact lines (tools/udp_sim/history_log.h).
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "tests/unit/udp_sim_answers.h"
#include "tools/udp_sim/history_log.h"
#include "tools/udp_sim/rng.h"
#include "tools/udp_sim/user_model.h"

using namespace imhash;
using namespace imhash::sim;
using namespace imhash::sim::testing;  // Message, Op, Status, and the helpers

namespace {

constexpr uint16_t kClient = 7;

UserModel::Config history_model_config(uint32_t users) {
  UserModel::Config c = model_config(users);
  c.history_client = kClient;
  return c;
}

// A request as the driver hands it to the history; `status` nullopt: no reply came.
HistoryRecord record(int64_t invoke_ns, int64_t complete_ns, Op op, uint64_t user_id,
                     std::optional<Status> status, Endpoint endpoint = {}) {
  return HistoryRecord{.invoke_ns = invoke_ns,
                       .complete_ns = complete_ns,
                       .user_id = user_id,
                       .endpoint = endpoint,
                       .op = op,
                       .answered = status.has_value(),
                       .status = status.value_or(Status::kOk)};
}

}  // namespace

TEST_CASE("udp_sim history: each write's endpoint is its own, per client and per write") {
  // Pinned: the checker and the docs read these addresses.
  CHECK(write_endpoint(7, 2, 1000).to_string() == "[2001:db8:7:0:2::3e8]:5222");
  CHECK(write_endpoint(0, 1, 1).to_string() == "[2001:db8::1:0:0:1]:5222");
  CHECK(write_endpoint(65535, UINT32_MAX, UINT64_MAX).to_string() ==
        "[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:5222");

  std::set<std::array<uint8_t, 16>> seen;
  for (uint16_t client : {uint16_t{0}, uint16_t{1}, uint16_t{65535}}) {
    for (uint32_t write : {0u, 1u, 2u, 255u, 256u, 65536u, UINT32_MAX}) {
      for (uint64_t id : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 47}) {
        const Endpoint e = write_endpoint(client, write, id);
        CAPTURE(e.to_string());
        CHECK(e.family == 6);
        CHECK(e.port == kWriteEndpointPort);
        CHECK(unreachable_endpoint_reason(e) == nullptr);  // a login server stores it
        CHECK(seen.insert(e.addr).second);
      }
    }
  }
}

TEST_CASE("udp_sim history: verify follows each write's endpoint") {
  UserModel m(history_model_config(2));
  const uint64_t id = m.id_of(0);

  const RequestTag login = m.start_own(0, Op::kLogin);
  CHECK(login.write == 1);
  const Endpoint first = *m.endpoint_to_send(login);
  CHECK(first == write_endpoint(kClient, 1, id));
  Message r = reply(login, id, Status::kOk, first);
  m.complete(login, &r);

  const RequestTag hb = m.start_own(0, Op::kHeartbeat);
  CHECK(hb.write == 2);
  const Endpoint second = *m.endpoint_to_send(hb);
  CHECK(second == write_endpoint(kClient, 2, id));
  r = reply(hb, id, Status::kOk, second);
  m.complete(hb, &r);
  CHECK(m.verify_counts().echo_checked == 2);
  CHECK(m.verify_counts().verify_failed == 0);
  CHECK(m.registered_endpoint(0) == second);

  // A LOOKUP after the second write expects the second endpoint; the first is stale.
  RequestTag look = m.start_lookup(0);
  REQUIRE(look.judge);
  r = reply(look, id, Status::kOk, second);
  m.complete(look, &r);
  CHECK(m.verify_counts().verified_ok == 1);
  look = m.start_lookup(0);
  r = reply(look, id, Status::kOk, first);
  m.complete(look, &r);
  REQUIRE(m.failures().size() == 1);
  CHECK(m.failures()[0].describe() == "user " + std::to_string(id) + " LOOKUP: expected " +
                                          second.to_string() + ", got " + first.to_string());

  // A HEARTBEAT echoing the previous write's endpoint fails; a LOGOUT is no write.
  const RequestTag hb3 = m.start_own(0, Op::kHeartbeat);
  r = reply(hb3, id, Status::kOk, second);
  m.complete(hb3, &r);
  CHECK(m.verify_counts().verify_failed == 2);
  CHECK(m.failures()[1].op == Op::kHeartbeat);
  CHECK(m.start_own(1, Op::kLogout).write == 0);

  // An unanswered write still used its number: the next one takes a new endpoint.
  const RequestTag lost = m.start_own(0, Op::kHeartbeat);
  m.complete(lost, nullptr);
  const RequestTag again = m.start_own(0, Op::kLogin);
  CHECK(again.write == 5);
  r = reply(again, id, Status::kOk, write_endpoint(kClient, 5, id));
  m.complete(again, &r);
  CHECK(m.registered_endpoint(0) == write_endpoint(kClient, 5, id));
  CHECK(m.verify_counts().verify_failed == 2);
}

TEST_CASE("udp_sim history: the mix against a correct server, every write of a user distinct") {
  const uint32_t n = 200;
  UserModel m(history_model_config(n));
  std::map<uint64_t, Endpoint> store;
  std::set<std::pair<uint64_t, std::array<uint8_t, 16>>> written;
  for (int i = 0; i < 20'000; ++i) {
    const RequestTag t = m.next();
    answer_correctly(m, t, store);
    if (t.op == Op::kLogin || t.op == Op::kHeartbeat) {
      REQUIRE(written.insert({m.id_of(t.user), store.at(m.id_of(t.user)).addr}).second);
    }
  }
  CHECK(written.size() > n);
  CHECK(m.verify_counts().verify_failed == 0);
  CHECK(m.verify_counts().verified_ok > 5'000);
}

TEST_CASE("udp_sim history: --lookup-only expects the storm's first write") {
  UserModel::Config c = history_model_config(3);
  c.storm = true;
  c.lookup_only = true;
  UserModel m(c);
  CHECK(m.registered_endpoint(2) == write_endpoint(kClient, 1, m.id_of(2)));
}

TEST_CASE("udp_sim history: the file's exact lines") {
  const Endpoint v4 = Endpoint::v4(0x0a000007, 4242);
  const Endpoint v6 = write_endpoint(3, 9, 12);
  const std::vector<HistoryRecord> records = {
      record(100, 250, Op::kLogin, 12, Status::kOk, v6),
      record(120, 900, Op::kLookup, 12, std::nullopt),
      record(130, 300, Op::kLookup, 18446744073709551615u, Status::kOk, v4),
      record(140, 310, Op::kLookup, 5, Status::kNotFound),
      record(9'000'000'000'000, 9'000'000'000'001, Op::kLogout, 5, Status::kUnavailable),
      record(150, 800, Op::kHeartbeat, 12, std::nullopt, v6),
  };
  const std::string want =
      "# imhash-history 1\n"
      "# udp_sim test\n"
      "100 250 LOGIN 12 OK [2001:db8:3:0:9::c]:5222\n"
      "120 900 LOOKUP 12 none -\n"
      "130 300 LOOKUP 18446744073709551615 OK 10.0.0.7:4242\n"
      "140 310 LOOKUP 5 NOT_FOUND -\n"
      "9000000000000 9000000000001 LOGOUT 5 UNAVAILABLE -\n"
      "150 800 HEARTBEAT 12 none [2001:db8:3:0:9::c]:5222\n";

  // Chunks of 1, 2 and 4 records hand each chunk to the writer thread, the last one partial;
  // 1000 keeps everything for finish().
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{4}, size_t{1000}}) {
    CAPTURE(chunk);
    std::ostringstream out;
    HistoryLog log(out, "udp_sim test", chunk);
    for (const HistoryRecord& r : records) log.add(r);
    CHECK(log.records() == records.size());
    CHECK(log.finish());
    CHECK(out.str() == want);
  }

  std::ostringstream empty;
  { HistoryLog log(empty, "nothing sent"); }  // the destructor finishes
  CHECK(empty.str() == "# imhash-history 1\n# nothing sent\n");

  std::ostream broken(nullptr);  // every write fails
  HistoryLog log(broken, "x", 1);
  log.add(records[0]);
  CHECK_FALSE(log.finish());
}

TEST_CASE("udp_sim history: the comment names the settings that made the history") {
  SimConfig c;
  c.target = "127.0.0.1:7000";
  c.users = 1000;
  c.first_user = 77;
  c.seed = 42;
  c.history = "h.txt";
  c.history_client = 3;
  const std::string comment = history_comment(c);
  CAPTURE(comment);
  for (const char* field : {"udp_sim ", "target=127.0.0.1:7000 ", "first_user=77 ", "users=1000 ",
                            "seed=42 ", "history_client=3 ", "window=64 "}) {
    CHECK(comment.find(field) != std::string::npos);
  }
  CHECK(comment.find('\n') == std::string::npos);
}
