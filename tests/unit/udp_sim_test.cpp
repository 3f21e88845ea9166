// udp_sim's logic without sockets: --mix parsing, synthetic endpoints, the user model and its
// --verify bookkeeping, the in-flight table (request ids, deadlines), pacing arithmetic, exit
// status and report contents.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "tests/unit/udp_sim_answers.h"
#include "tools/udp_sim/in_flight.h"
#include "tools/udp_sim/pacer.h"
#include "tools/udp_sim/report.h"
#include "tools/udp_sim/sim_config.h"
#include "tools/udp_sim/user_model.h"

using namespace imhash;
using namespace imhash::sim;
using namespace imhash::sim::testing;  // Message, Op, Status, and the helpers

TEST_CASE("udp_sim: --mix parsing") {
  std::string err;
  auto m = parse_mix("heartbeat=50,lookup=45,logout=5", err);
  REQUIRE(m);
  CHECK(*m == Mix{0, 50, 45, 5});
  m = parse_mix("lookup=1", err);
  REQUIRE(m);
  CHECK(*m == Mix{0, 0, 1, 0});
  m = parse_mix("login=3,logout=2", err);
  REQUIRE(m);
  CHECK(*m == Mix{3, 0, 0, 2});
  CHECK(parse_mix(to_string(Mix{1, 2, 3, 4}), err) == Mix{1, 2, 3, 4});

  for (const char* bad :
       {"", "lookup", "lookup=", "lookup=x", "lookup=-1", "ping=5", "lookup=1,lookup=2",
        "lookup=0,logout=0", "lookup=5,", "lookup=2000000"}) {
    const std::string text = bad;
    CAPTURE(text);
    err.clear();
    CHECK_FALSE(parse_mix(bad, err));
    CHECK_FALSE(err.empty());
  }
}

TEST_CASE("udp_sim: in-flight capacity follows the mode") {
  SimConfig c;
  c.window = 300;
  CHECK(c.in_flight_capacity() == 300);
  c.rate = 1000;  // 1000/s * (0.2 s * 4 tries + 0.1) * 1.5
  CHECK(c.in_flight_capacity() == 1350);
  c.rate = 1;
  CHECK(c.in_flight_capacity() == 64);
  c.rate = 1e8;
  CHECK(c.in_flight_capacity() == InFlightTable::kMaxCapacity);
}

TEST_CASE("udp_sim: synthetic endpoints are distinct, and IPv6 for the asked share") {
  std::set<std::pair<std::array<uint8_t, 16>, uint8_t>> seen;
  int v6 = 0;
  for (uint64_t id = 1; id <= 100'000; ++id) {
    const Endpoint e = synthetic_endpoint(id, 10);
    REQUIRE(e.valid());
    REQUIRE(e.port >= 1024);
    if (e.family == 6) {
      ++v6;
      CHECK(e.addr[0] == 0x20);
      CHECK(e.addr[1] == 0x01);
    } else {
      CHECK(e.addr[0] == 10);
    }
    REQUIRE(seen.insert({e.addr, e.family}).second);  // distinct addresses, ports aside
    CHECK(synthetic_endpoint(id, 10) == e);           // a pure function of the id
  }
  CHECK(v6 > 9'000);
  CHECK(v6 < 11'000);
  CHECK(synthetic_endpoint(5, 0).family == 4);
  CHECK(synthetic_endpoint(5, 100).family == 6);
}

TEST_CASE("udp_sim: every user logs in first, in id order, and busy users only get looked up") {
  UserModel m(model_config(3));
  for (uint32_t u = 0; u < 3; ++u) {
    const RequestTag t = m.next();
    CHECK(t.op == Op::kLogin);
    CHECK(t.user == u);
    CHECK(m.busy(u));
  }
  CHECK_FALSE(m.starting());
  // Everyone busy: whatever the mix draws becomes a LOOKUP, and none can be judged.
  for (int i = 0; i < 100; ++i) {
    const RequestTag t = m.next();
    REQUIRE(t.op == Op::kLookup);
    CHECK_FALSE(t.judge);
  }
  CHECK(m.id_of(2) == 1002);
  CHECK(m.socket_of(5) == 1);
}

TEST_CASE("udp_sim: a storm logs every user in once, then looks every one up once, then ends") {
  UserModel::Config c = model_config(5);
  c.storm = true;
  UserModel m(c);
  std::map<uint64_t, Endpoint> store;
  std::vector<RequestTag> logins;
  while (m.can_issue()) logins.push_back(m.next());
  REQUIRE(logins.size() == 5);
  for (uint32_t u = 0; u < 5; ++u) {
    CHECK(logins[u].op == Op::kLogin);
    CHECK(logins[u].user == u);
  }
  // No LOOKUP until every LOGIN has ended: the last one to end here gets no reply at all.
  for (uint32_t u = 0; u < 4; ++u) {
    answer_correctly(m, logins[u], store);
    CHECK_FALSE(m.can_issue());
  }
  m.complete(logins[4], nullptr);
  CHECK_FALSE(m.finished());
  std::vector<RequestTag> lookups;
  while (m.can_issue()) lookups.push_back(m.next());
  REQUIRE(lookups.size() == 5);
  for (uint32_t u = 0; u < 5; ++u) {
    CHECK(lookups[u].op == Op::kLookup);
    CHECK(lookups[u].user == u);
    CHECK(lookups[u].judge == (u < 4));  // user 4's LOGIN went unanswered: its state is unknown
  }
  // A correct server finds the four; user 0's record lost would be a verify failure.
  store.erase(m.id_of(0));
  for (const RequestTag& t : lookups) {
    CHECK_FALSE(m.finished());
    answer_correctly(m, t, store);
  }
  CHECK(m.finished());
  CHECK_FALSE(m.can_issue());
  CHECK(m.verify_counts().verified_ok == 3);
  CHECK(m.verify_counts().verify_failed == 1);
  CHECK(m.verify_counts().unjudged == 1);
}

TEST_CASE("udp_sim: outside a storm there is always a next request and no end") {
  UserModel m(model_config(2));
  for (int i = 0; i < 10; ++i) {
    CHECK(m.can_issue());
    m.next();
  }
  CHECK_FALSE(m.finished());
}

TEST_CASE("udp_sim: verify judges a LOOKUP only against a settled state") {
  UserModel m(model_config(2));
  const uint64_t id0 = m.id_of(0);
  const Endpoint ep0 = m.registered_endpoint(0);
  CHECK(m.endpoint_to_send(RequestTag{.user = 0, .op = Op::kLogin}) == ep0);

  // Unknown state: not judged.
  RequestTag look = m.start_lookup(0);
  CHECK_FALSE(look.judge);
  Message r = reply(look, id0, Status::kNotFound);
  m.complete(look, &r);
  CHECK(m.verify_counts().unjudged == 1);

  // LOGIN answered OK with the right echo: logged in.
  RequestTag login = m.start_own(0, Op::kLogin);
  CHECK(m.busy(0));
  look = m.start_lookup(0);  // sent while the LOGIN is in flight
  CHECK_FALSE(look.judge);
  r = reply(login, id0, Status::kOk, ep0);
  m.complete(login, &r);
  CHECK(m.state(0) == UserState::kLoggedIn);
  CHECK(m.verify_counts().echo_checked == 1);
  r = reply(look, id0, Status::kOk, ep0);
  m.complete(look, &r);
  CHECK(m.verify_counts().unjudged == 2);

  // Settled: right endpoint passes, wrong endpoint and NOT_FOUND fail, UNAVAILABLE is no verdict.
  look = m.start_lookup(0);
  CHECK(look.judge);
  r = reply(look, id0, Status::kOk, ep0);
  m.complete(look, &r);
  CHECK(m.verify_counts().verified_ok == 1);

  Endpoint wrong = ep0;
  wrong.port = static_cast<uint16_t>(wrong.port + 1);
  look = m.start_lookup(0);
  r = reply(look, id0, Status::kOk, wrong);
  m.complete(look, &r);
  look = m.start_lookup(0);
  r = reply(look, id0, Status::kNotFound);
  m.complete(look, &r);
  look = m.start_lookup(0);
  r = reply(look, id0, Status::kUnavailable);
  m.complete(look, &r);
  CHECK(m.verify_counts().verify_failed == 2);
  CHECK(m.verify_counts().unjudged == 3);
  REQUIRE(m.failures().size() == 2);
  CHECK(m.failures()[0].user_id == id0);
  CHECK(m.failures()[0].describe() == "user " + std::to_string(id0) + " LOOKUP: expected " +
                                          ep0.to_string() + ", got " + wrong.to_string());
  CHECK(m.failures()[1].got_text() == "NOT_FOUND");

  // A state change between send and reply makes the LOOKUP unjudgeable, even when it is over.
  look = m.start_lookup(0);
  RequestTag hb = m.start_own(0, Op::kHeartbeat);
  r = reply(hb, id0, Status::kOk, ep0);
  m.complete(hb, &r);
  r = reply(look, id0, Status::kNotFound);
  m.complete(look, &r);
  CHECK(m.verify_counts().verify_failed == 2);
  CHECK(m.verify_counts().unjudged == 4);

  // Logged out: NOT_FOUND is right, an OK (a record that resurfaced) is wrong.
  RequestTag out = m.start_own(0, Op::kLogout);
  r = reply(out, id0, Status::kOk);
  m.complete(out, &r);
  CHECK(m.state(0) == UserState::kLoggedOut);
  look = m.start_lookup(0);
  CHECK(look.judge);
  r = reply(look, id0, Status::kNotFound);
  m.complete(look, &r);
  CHECK(m.verify_counts().verified_ok == 2);
  look = m.start_lookup(0);
  r = reply(look, id0, Status::kOk, ep0);
  m.complete(look, &r);
  CHECK(m.verify_counts().verify_failed == 3);
  CHECK(m.failures()[2].expected_text() == "NOT_FOUND");

  // No reply to the user's own request: its state is unknown again.
  login = m.start_own(0, Op::kLogin);
  m.complete(login, nullptr);
  CHECK(m.state(0) == UserState::kUnknown);
  CHECK_FALSE(m.busy(0));
  CHECK_FALSE(m.start_lookup(0).judge);

  // A LOGOUT answered NOT_FOUND still means logged out; an error status means unknown.
  out = m.start_own(1, Op::kLogout);
  r = reply(out, m.id_of(1), Status::kNotFound);
  m.complete(out, &r);
  CHECK(m.state(1) == UserState::kLoggedOut);
  login = m.start_own(1, Op::kLogin);
  r = reply(login, m.id_of(1), Status::kTimeout);
  m.complete(login, &r);
  CHECK(m.state(1) == UserState::kUnknown);
}

TEST_CASE(
    "udp_sim: a wrong LOGIN/HEARTBEAT echo fails verify, and without --verify nothing is judged") {
  UserModel m(model_config(1));
  const RequestTag login = m.start_own(0, Op::kLogin);
  const Message r = reply(login, m.id_of(0), Status::kOk, synthetic_endpoint(4242, 0));
  m.complete(login, &r);
  CHECK(m.verify_counts().verify_failed == 1);
  CHECK(m.failures()[0].op == Op::kLogin);

  UserModel quiet(model_config(1, Mix{}, /*verify=*/false));
  const RequestTag t = quiet.start_own(0, Op::kLogin);
  const Message r2 = reply(t, quiet.id_of(0), Status::kOk, synthetic_endpoint(4242, 0));
  quiet.complete(t, &r2);
  const RequestTag look = quiet.start_lookup(0);
  CHECK_FALSE(look.judge);
  quiet.complete(look, &r2);
  CHECK(quiet.verify_counts().verify_failed == 0);
  CHECK(quiet.verify_counts().unjudged == 0);
}

TEST_CASE("udp_sim: at most kMaxFailures failures are kept, all are counted") {
  UserModel m(model_config(1));
  const RequestTag login = m.start_own(0, Op::kLogin);
  Message r = reply(login, m.id_of(0), Status::kOk, m.registered_endpoint(0));
  m.complete(login, &r);
  for (int i = 0; i < 25; ++i) {
    const RequestTag look = m.start_lookup(0);
    r = reply(look, m.id_of(0), Status::kNotFound);
    m.complete(look, &r);
  }
  CHECK(m.verify_counts().verify_failed == 25);
  CHECK(m.failures().size() == UserModel::kMaxFailures);
}

TEST_CASE("udp_sim: --observed users register their socket's address") {
  UserModel::Config c = model_config(10);
  c.observed = {Endpoint::v4(0x7f000001, 5000), Endpoint::v4(0x7f000001, 5001),
                Endpoint::v4(0x7f000001, 5002), Endpoint::v4(0x7f000001, 5003)};
  UserModel m(c);
  CHECK_FALSE(m.endpoint_to_send(RequestTag{.user = 3, .op = Op::kLogin}));
  CHECK(m.registered_endpoint(6) == Endpoint::v4(0x7f000001, 5002));
  CHECK(m.registered_endpoint(7) == Endpoint::v4(0x7f000001, 5003));
}

TEST_CASE("udp_sim: the mix against a correct server: shares as asked, no verify failure") {
  const uint32_t n = 5000;
  UserModel m(model_config(n, Mix{0, 50, 45, 5}));
  std::map<uint64_t, Endpoint> store;
  for (uint32_t i = 0; i < n; ++i) answer_correctly(m, m.next(), store);
  CHECK(store.size() == n);

  std::array<int, 4> ops{};
  const int draws = 100'000;
  for (int i = 0; i < draws; ++i) {
    const RequestTag t = m.next();
    ++ops[op_index(t.op)];
    answer_correctly(m, t, store);
  }
  const auto share = [&](Op op) { return ops[op_index(op)] * 100.0 / draws; };
  CHECK(share(Op::kLookup) == doctest::Approx(45).epsilon(0.05));
  CHECK(share(Op::kLogin) + share(Op::kHeartbeat) + share(Op::kLogout) ==
        doctest::Approx(55).epsilon(0.05));
  CHECK(share(Op::kLogout) > 3);
  CHECK(share(Op::kLogin) > 0.5);    // logged-out users come back through the mix
  CHECK(store.size() > n * 8 / 10);  // mostly logged in
  CHECK(m.verify_counts().verify_failed == 0);
  CHECK(m.verify_counts().verified_ok > 40'000);
  CHECK(m.verify_counts().unjudged == 0);  // answered at once: nothing changes in between
}

TEST_CASE("udp_sim: in-flight table: request ids, late replies, deadlines") {
  InFlightTable t(64);
  CHECK(t.capacity() == 64);
  std::set<uint32_t> ids;
  std::vector<uint32_t> slots;
  for (int i = 0; i < 64; ++i) {
    const uint32_t s = t.acquire();
    slots.push_back(s);
    REQUIRE(ids.insert(t[s].request_id).second);
    REQUIRE(t.find(t[s].request_id) == s);
  }
  CHECK(t.full());
  CHECK(t.size() == 64);

  const uint32_t s0 = slots[0];
  const uint32_t old_id = t[s0].request_id;
  t.release(s0);
  CHECK(t.find(old_id) == InFlightTable::kNone);  // answered: a duplicate reply is late
  const uint32_t again = t.acquire();
  CHECK(again == s0);
  CHECK(t[again].request_id != old_id);
  CHECK(t.find(old_id) == InFlightTable::kNone);  // the slot's next request does not take it
  CHECK(t.find(t[again].request_id) == again);
  CHECK(t.find(0xffffffffu) == InFlightTable::kNone);

  // Deadlines come out in arming order; re-arming moves a slot to the back; release disarms.
  CHECK(t.next_deadline() == INT64_MAX);
  t.arm(slots[1], 100);
  t.arm(slots[2], 200);
  t.arm(slots[3], 300);
  t.arm(slots[1], 300);  // a retry
  t.release(slots[2]);
  CHECK(t.next_deadline() == 300);
  CHECK(t.pop_expired(299) == InFlightTable::kNone);
  CHECK(t.pop_expired(300) == slots[3]);
  CHECK(t.pop_expired(300) == slots[1]);
  CHECK(t.pop_expired(1000) == InFlightTable::kNone);
  CHECK(t.next_deadline() == INT64_MAX);

  InFlightTable one(1);
  const uint32_t s = one.acquire();
  CHECK(one.find(one[s].request_id) == s);
  CHECK(one.full());
}

TEST_CASE("udp_sim: open-loop schedule and closed-loop quota") {
  for (double rate : {1.0, 3.0, 1000.0, 12345.6, 1e6}) {
    CAPTURE(rate);
    const int64_t start = 5'000'000'000;
    OpenLoopSchedule s(rate, start);
    CHECK(s.due_by(start - 1) == 0);
    CHECK(s.due_at(0) == start);
    int64_t prev = start;
    for (uint64_t k = 0; k < 20'000; ++k) {
      const int64_t at = s.due_at(k);
      REQUIRE(at >= prev);
      prev = at;
      REQUIRE(s.due_by(at) == k + 1);
      if (at > start) REQUIRE(s.due_by(at - 1) <= k);
    }
  }
  OpenLoopSchedule s(1000, 0);
  CHECK(s.due_by(999'999'999) == 1000);  // exactly `rate` requests in the first second
  CHECK(s.due_by(1'000'000'000) == 1001);
  CHECK(s.due_at(500) == 500'000'000);

  CHECK(closed_loop_quota(64, 0) == 64);
  CHECK(closed_loop_quota(64, 60) == 4);
  CHECK(closed_loop_quota(64, 64) == 0);
  CHECK(closed_loop_quota(64, 70) == 0);
}

TEST_CASE("udp_sim: the run's phases leave the warm-up out of the elapsed time") {
  constexpr int64_t kSecond = 1'000'000'000;
  const int64_t start = 7 * kSecond;
  const RunPhases p(start, 1.0, 1.0);  // --warmup 1 --duration 1
  CHECK(p.start == start);
  CHECK(p.measure_from == start + kSecond);
  CHECK(p.end == start + 2 * kSecond);
  CHECK(p.in_warmup(start));
  CHECK(p.in_warmup(p.measure_from - 1));
  CHECK_FALSE(p.in_warmup(p.measure_from));
  CHECK(p.elapsed_s(start) == 0.0);
  CHECK(p.elapsed_s(p.measure_from - 1) == 0.0);  // the warm-up counts for nothing
  CHECK(p.elapsed_s(p.end) == 1.0);
  CHECK(p.elapsed_s(p.end + kSecond / 4) == 1.25);  // a drain after the end counts
  const RunPhases none(start, 0.0, 2.5);
  CHECK(none.measure_from == start);
  CHECK_FALSE(none.in_warmup(start));
  CHECK(none.end == start + 5 * kSecond / 2);
  CHECK(none.elapsed_s(none.end) == 2.5);
}

TEST_CASE("udp_sim: exit status and verify result") {
  Counters c;
  VerifyCounts v;
  CHECK(exit_code_for(false, c, v) == 0);  // nothing sent (interrupted at once)
  c.ops[0].requests = 10;
  CHECK(exit_code_for(false, c, v) == 69);  // sent, never answered
  c.ops[0].status[0] = 10;
  CHECK(exit_code_for(false, c, v) == 0);
  CHECK(exit_code_for(true, c, v) == 2);  // nothing verified
  CHECK(std::string(verify_result(true, c, v)) == "nothing_verified");
  v.verified_ok = 5;
  CHECK(exit_code_for(true, c, v) == 0);
  CHECK(std::string(verify_result(true, c, v)) == "pass");
  CHECK(std::string(verify_result(false, c, v)) == "off");
  c.amplified_replies = 1;
  CHECK(exit_code_for(true, c, v) == 1);
  CHECK(exit_code_for(false, c, v) == 0);  // counted, but only --verify fails on it
  c.amplified_replies = 0;
  v.verify_failed = 1;
  CHECK(exit_code_for(true, c, v) == 1);
  CHECK(std::string(verify_result(true, c, v)) == "fail");
}

TEST_CASE("udp_sim: progress line and JSON summary") {
  Counters before;
  Counters now;
  now.ops[op_index(Op::kLookup)].requests = 1000;
  now.ops[op_index(Op::kLookup)].status[0] = 990;
  now.ops[op_index(Op::kLookup)].status[static_cast<size_t>(Status::kNotFound)] = 3;
  now.ops[op_index(Op::kLookup)].status[static_cast<size_t>(Status::kRateLimited)] = 5;
  now.ops[op_index(Op::kLookup)].no_reply = 2;
  now.late_replies = 4;
  auto lat = std::make_unique<Latencies>();
  for (int i = 0; i < 998; ++i) lat->record(Op::kLookup, 100);
  VerifyCounts v{.verified_ok = 7, .verify_failed = 0, .unjudged = 1, .echo_checked = 0};

  const std::string line = progress_line(2.0, 0.5, now, before, lat->interval, 64, true, v);
  CAPTURE(line);
  CHECK(line.find("[   2.0s]") == 0);
  CHECK(line.find("sent 2000/s") != std::string::npos);
  CHECK(line.find("done 1996/s") != std::string::npos);
  CHECK(line.find("p50 100us") != std::string::npos);
  CHECK(line.find("NOT_FOUND=3") != std::string::npos);
  CHECK(line.find("TIMEOUT=0") != std::string::npos);
  CHECK(line.find("UNAVAILABLE=0") != std::string::npos);
  CHECK(line.find("RATE_LIMITED=5") != std::string::npos);
  CHECK(line.find("BAD_REQUEST") == std::string::npos);
  CHECK(line.find("no_reply=2") != std::string::npos);
  CHECK(line.find("late=4") != std::string::npos);
  CHECK(line.find("verify_failed=0") != std::string::npos);

  lat->fold_interval();
  SimConfig cfg;
  cfg.users = 10;
  cfg.verify = true;
  std::vector<VerifyFailure> failures{VerifyFailure{.user_id = 3,
                                                    .op = Op::kLookup,
                                                    .expected = Endpoint::v4(0x0a000003, 7),
                                                    .status = Status::kNotFound,
                                                    .got = std::nullopt}};
  const RunSummary s{.config = cfg,
                     .target = "127.0.0.1:7000",
                     .counters = now,
                     .latencies = *lat,
                     .verify = v,
                     .failures = failures,
                     .elapsed_s = 2.0,
                     .interrupted = false};
  // Through text, as a script reads it.
  const auto j = boost::json::parse(boost::json::serialize(summary_json(s))).as_object();
  CHECK(j.at("requests").to_number<uint64_t>() == 1000);
  CHECK(j.at("replies").to_number<uint64_t>() == 998);
  CHECK(j.at("no_reply").to_number<uint64_t>() == 2);
  CHECK(j.at("status").at("NOT_FOUND").to_number<uint64_t>() == 3);
  CHECK(j.at("ops").at("LOOKUP").at("status").at("OK").to_number<uint64_t>() == 990);
  CHECK(j.at("ops").at("LOGIN").at("requests").to_number<uint64_t>() == 0);
  CHECK(j.at("latency_us").at("p50").to_number<uint64_t>() == 100);
  CHECK(j.at("late_replies").to_number<uint64_t>() == 4);
  CHECK(j.at("mode").as_string() == "closed");
  CHECK(j.at("verify").at("result").as_string() == "pass");
  CHECK(j.at("verify").at("failures").as_array().size() == 1);
  CHECK(j.at("verify").at("failures").at(0).at("got").as_string() == "NOT_FOUND");
  CHECK(j.at("verify").at("failures").at(0).at("expected").as_string() == "10.0.0.3:7");
  CHECK(j.at("exit_code").to_number<int>() == 0);

  const std::string text = summary_text(s);
  CAPTURE(text);
  CHECK(text.find("verify: pass") != std::string::npos);
  CHECK(text.find("failure: user 3 LOOKUP: expected 10.0.0.3:7, got NOT_FOUND") !=
        std::string::npos);
  CHECK(text.find("RATE_LIMITED=5") != std::string::npos);
}
