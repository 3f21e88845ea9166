// The history checker (tools/nemesis/): histories made up to break one rule each are flagged with
// that rule and no other, histories the model allows (concurrency, indeterminate writes) pass,
// windows move anomalies inside them, and the reports show it (the parsers: history_test.cpp).
#include "tools/nemesis/history_checker.h"

#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace imhash::history {
namespace {

constexpr uint64_t kNsPerMs = 1'000'000;

// A history line with times in ms: "<invoke> <complete> <op> <user> <status> <endpoint>".
std::string at(uint64_t invoke_ms, uint64_t complete_ms, const char* op, const char* status,
               const char* endpoint = "-", uint64_t user = 7) {
  return std::to_string(invoke_ms * kNsPerMs) + " " + std::to_string(complete_ms * kNsPerMs) + " " +
         op + " " + std::to_string(user) + " " + status + " " + endpoint;
}

// Parses `lines` as the file `name` (header added) into `into`; fails the test on an error.
void add_file(History& into, const std::vector<std::string>& lines, const char* name = "c1.hist") {
  std::string text = std::string(kHeaderLine) + "\n";
  for (const std::string& l : lines) text += l + "\n";
  std::istringstream in(text);
  const std::optional<InputError> error = parse_history(in, name, into);
  REQUIRE_MESSAGE(!error, error->to_string());
}

Report judged(const std::vector<std::string>& lines, const std::vector<Window>& windows = {}) {
  History h;
  add_file(h, lines);
  return check(std::move(h), windows);
}

// The anomalies counted against the run: "stale=1 unavailable=2", "" when none.
std::string outside(const Report& r) {
  std::string out;
  for (Rule rule : kRules) {
    if (r.tally(rule).outside == 0) continue;
    if (!out.empty()) out += ' ';
    out += std::string(to_string(rule)) + "=" + std::to_string(r.tally(rule).outside);
  }
  return out;
}

std::string first_example(const Report& r, Rule rule) {
  const std::vector<Example>& examples = r.tally(rule).examples;
  return examples.empty() ? "" : examples.front().text;
}

Window window(uint64_t start_ms, uint64_t end_ms, const char* kind, std::vector<Rule> rules) {
  Window w{.start_ns = start_ms * kNsPerMs, .end_ns = end_ms * kNsPerMs, .kind = kind};
  for (Rule r : rules) w.excuses[static_cast<size_t>(r)] = true;
  return w;
}

TEST_CASE("history checker: a clean history with concurrent requests passes") {
  History h;
  add_file(h, {at(0, 10, "LOGIN", "OK", "10.0.0.1:1"),
               at(5, 15, "LOOKUP", "NOT_FOUND"),          // concurrent with the LOGIN
               at(12, 14, "LOOKUP", "OK", "10.0.0.1:1"),  // after it
               at(20, 30, "HEARTBEAT", "OK", "[2001:db8::2]:2"),
               at(25, 35, "LOOKUP", "OK", "10.0.0.1:1"),       // concurrent: old value
               at(26, 36, "LOOKUP", "OK", "[2001:db8::2]:2"),  // concurrent: new value
               at(40, 41, "LOOKUP", "OK", "[2001:db8::2]:2"), at(50, 60, "LOGOUT", "OK"),
               at(55, 58, "LOOKUP", "OK", "[2001:db8::2]:2"),  // concurrent with the LOGOUT
               at(61, 62, "LOOKUP", "NOT_FOUND"), at(70, 80, "LOGIN", "OK", "10.0.0.1:3"),
               at(75, 76, "LOOKUP", "NOT_FOUND"),
               at(90, 91, "LOOKUP", "NOT_FOUND", "-", 9)});  // a user nobody wrote
  // A second client looks up user 7 and writes user 8.
  add_file(h,
           {at(1, 2, "LOGIN", "OK", "10.0.0.8:1", 8), at(82, 83, "LOOKUP", "OK", "10.0.0.1:3"),
            at(84, 85, "LOOKUP", "OK", "10.0.0.8:1", 8)},
           "c2.hist");
  const Report r = check(std::move(h), {});
  CHECK(outside(r) == "");
  CHECK(r.passed());
  CHECK(r.files == 2);
  CHECK(r.events == 16);
  CHECK(r.users == 3);
  CHECK(r.judged_lookups == 11);
  CHECK(r.ops[2][0] == 7);  // LOOKUP OK
  CHECK(r.ops[2][1] == 4);  // LOOKUP NOT_FOUND
  CHECK(r.ops[3][0] == 1);  // LOGOUT OK
  CHECK(r.last_complete_ns == 91 * kNsPerMs);
}

TEST_CASE("history checker: phantom, a value from nowhere or from the future") {
  SUBCASE("an endpoint no write carries") {
    const Report r =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOOKUP", "OK", "10.0.0.9:9")});
    CHECK(outside(r) == "phantom=1");
    CHECK_FALSE(r.passed());
    CHECK(first_example(r, Rule::kPhantom) ==
          "user 7: LOOKUP at 20.000..30.000 ms answered OK 10.0.0.9:9 (c1.hist:3), an endpoint "
          "no write of the user carries");
  }
  SUBCASE("an endpoint written only after the lookup completed") {
    const Report r =
        judged({at(0, 10, "LOOKUP", "OK", "10.0.0.1:1"), at(11, 20, "LOGIN", "OK", "10.0.0.1:1")});
    CHECK(outside(r) == "phantom=1");
    CHECK(first_example(r, Rule::kPhantom)
              .find("only written later, by LOGIN 10.0.0.1:1 at "
                    "11.000..20.000 ms answered OK (c1.hist:3)") != std::string::npos);
  }
  SUBCASE("an endpoint only a refused write carries") {
    const Report r = judged({at(0, 10, "LOGIN", "UNAUTHORIZED", "10.0.0.1:1"),
                             at(20, 30, "LOOKUP", "OK", "10.0.0.1:1")});
    CHECK(outside(r) == "phantom=1");
    CHECK(first_example(r, Rule::kPhantom).find("only a refused write") != std::string::npos);
  }
  SUBCASE("an OK without an endpoint") {
    const Report r = judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOOKUP", "OK")});
    CHECK(outside(r) == "phantom=1");
  }
  SUBCASE("another user's endpoint") {
    const Report r = judged(
        {at(0, 10, "LOGIN", "OK", "10.0.0.1:1", 8), at(20, 30, "LOOKUP", "OK", "10.0.0.1:1", 7)});
    CHECK(outside(r) == "phantom=1");
  }
}

TEST_CASE("history checker: stale, a value an acknowledged write had overwritten") {
  const Report r =
      judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "OK", "10.0.0.1:2"),
              at(40, 50, "LOOKUP", "OK", "10.0.0.1:1")});
  CHECK(outside(r) == "stale=1");
  CHECK_FALSE(r.passed());
  CHECK(first_example(r, Rule::kStale) ==
        "user 7: LOOKUP at 40.000..50.000 ms answered OK 10.0.0.1:1 (c1.hist:4), written by LOGIN "
        "10.0.0.1:1 at 0.000..10.000 ms answered OK (c1.hist:2), which HEARTBEAT 10.0.0.1:2 at "
        "20.000..30.000 ms answered OK (c1.hist:3) had overwritten before the lookup began");
  SUBCASE("the read is fine while any write of its value survives") {
    const Report again = judged(
        {at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "OK", "10.0.0.1:2"),
         at(32, 35, "HEARTBEAT", "OK", "10.0.0.1:1"), at(40, 50, "LOOKUP", "OK", "10.0.0.1:1")});
    CHECK(outside(again) == "");
  }
}

TEST_CASE("history checker: logout_undone, a value an acknowledged LOGOUT had removed") {
  const Report r = judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOGOUT", "OK"),
                           at(40, 50, "LOOKUP", "OK", "10.0.0.1:1")});
  CHECK(outside(r) == "logout_undone=1");
  CHECK(first_example(r, Rule::kLogoutUndone)
            .find("which LOGOUT at 20.000..30.000 ms answered OK (c1.hist:3) had removed") !=
        std::string::npos);
  SUBCASE("reported instead of stale when a later write overwrote the value too") {
    const Report again =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOGOUT", "OK"),
                at(32, 35, "LOGIN", "OK", "10.0.0.1:2"), at(40, 50, "LOOKUP", "OK", "10.0.0.1:1")});
    CHECK(outside(again) == "logout_undone=1");
  }
}

TEST_CASE("history checker: write_lost, NOT_FOUND after an acknowledged write") {
  SUBCASE("the initial state overwritten") {
    const Report r =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOOKUP", "NOT_FOUND")});
    CHECK(outside(r) == "write_lost=1");
    CHECK(
        first_example(r, Rule::kWriteLost) ==
        "user 7: LOOKUP at 20.000..30.000 ms answered NOT_FOUND (c1.hist:3), but LOGIN 10.0.0.1:1 "
        "at 0.000..10.000 ms answered OK (c1.hist:2) was acknowledged before the lookup began, "
        "with no LOGOUT before it");
  }
  SUBCASE("a LOGOUT overwritten by a later LOGIN") {
    const Report r =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOGOUT", "OK"),
                at(40, 50, "LOGIN", "OK", "10.0.0.1:2"), at(60, 70, "LOOKUP", "NOT_FOUND")});
    CHECK(outside(r) == "write_lost=1");
    CHECK(first_example(r, Rule::kWriteLost).find("after LOGOUT at 20.000..30.000 ms") !=
          std::string::npos);
  }
  SUBCASE("a refused LOGOUT removes nothing") {
    const Report r =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOGOUT", "RATE_LIMITED"),
                at(40, 50, "LOOKUP", "NOT_FOUND")});
    CHECK(outside(r) == "write_lost=1");
  }
}

TEST_CASE("history checker: UNAVAILABLE and TIMEOUT fail a run, no reply is only reported") {
  const Report r = judged(
      {at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "TIMEOUT", "10.0.0.1:2"),
       at(40, 50, "LOOKUP", "UNAVAILABLE"), at(60, 70, "LOGOUT", "UNAVAILABLE")});
  CHECK(outside(r) == "unavailable=3");
  CHECK_FALSE(r.passed());
  CHECK(first_example(r, Rule::kUnavailable) ==
        "user 7: HEARTBEAT 10.0.0.1:2 at 20.000..30.000 ms answered TIMEOUT (c1.hist:3)");
  const Report quiet =
      judged({at(0, 10, "LOGIN", "none", "10.0.0.1:1"), at(20, 30, "LOOKUP", "none")});
  CHECK(outside(quiet) == "no_reply=2");
  CHECK(quiet.passed());
  CHECK(first_example(quiet, Rule::kNoReply) ==
        "user 7: LOGIN 10.0.0.1:1 at 0.000..10.000 ms got no reply (c1.hist:2)");
}

TEST_CASE("history checker: an indeterminate write may take effect at any time, or never") {
  SUBCASE("a write without a reply read after a later acknowledged write") {
    const Report r = judged(
        {at(0, 10, "LOGIN", "none", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "OK", "10.0.0.1:2"),
         at(40, 50, "LOOKUP", "OK", "10.0.0.1:1"), at(60, 70, "LOOKUP", "OK", "10.0.0.1:2")});
    CHECK(outside(r) == "no_reply=1");
    CHECK(r.passed());
  }
  SUBCASE("a TIMEOUT write: only its own unavailable") {
    const Report r = judged(
        {at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "TIMEOUT", "10.0.0.1:2"),
         at(40, 50, "LOOKUP", "OK", "10.0.0.1:1"), at(60, 70, "LOOKUP", "OK", "10.0.0.1:2"),
         at(80, 90, "LOOKUP", "OK", "10.0.0.1:1")});
    CHECK(outside(r) == "unavailable=1");
  }
  SUBCASE("a LOGIN answered NOT_FOUND, and one never written") {
    const Report r =
        judged({at(0, 10, "LOGIN", "NOT_FOUND", "10.0.0.1:1"),
                at(20, 30, "LOOKUP", "OK", "10.0.0.1:1"), at(40, 50, "LOOKUP", "NOT_FOUND")});
    CHECK(outside(r) == "");
  }
  SUBCASE("a LOGOUT without a reply excuses NOT_FOUND, even after a later acknowledged LOGIN") {
    const Report r =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "LOGOUT", "none"),
                at(40, 50, "LOGIN", "OK", "10.0.0.1:2"), at(60, 70, "LOOKUP", "NOT_FOUND"),
                at(80, 90, "LOOKUP", "OK", "10.0.0.1:2")});
    CHECK(outside(r) == "no_reply=1");
  }
  SUBCASE("a LOGOUT invoked before a NOT_FOUND completed excuses it") {
    const Report r = judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"),
                             at(20, 30, "LOOKUP", "NOT_FOUND"), at(25, 40, "LOGOUT", "OK")});
    CHECK(outside(r) == "");
  }
}

TEST_CASE("history checker: a read concurrent with a write may see either value") {
  for (const char* seen : {"10.0.0.1:1", "10.0.0.1:2"}) {
    CAPTURE(seen);
    const Report r =
        judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 40, "HEARTBEAT", "OK", "10.0.0.1:2"),
                at(25, 35, "LOOKUP", "OK", seen), at(15, 45, "LOOKUP", "OK", seen)});
    CHECK(outside(r) == "");
  }
  const Report removed =
      judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 40, "LOGOUT", "OK"),
              at(25, 35, "LOOKUP", "OK", "10.0.0.1:1"), at(25, 35, "LOOKUP", "NOT_FOUND")});
  CHECK(outside(removed) == "");
  // The edges: a write that completes at the very ns the read begins is not known before it.
  const Report edge =
      judged({at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "OK", "10.0.0.1:2"),
              at(30, 40, "LOOKUP", "OK", "10.0.0.1:1")});
  CHECK(outside(edge) == "");
}

TEST_CASE("history checker: a window excusing a rule counts its anomalies inside, by kind") {
  const std::vector<std::string> lines = {
      at(0, 10, "LOGIN", "OK", "10.0.0.1:1"), at(20, 30, "HEARTBEAT", "OK", "10.0.0.1:2"),
      at(40, 50, "LOOKUP", "OK", "10.0.0.1:1"), at(100, 110, "LOOKUP", "TIMEOUT")};
  CHECK(outside(judged(lines)) == "stale=1 unavailable=1");
  // Windows that do not excuse: another rule, or a time that misses the request.
  CHECK(outside(judged(lines, {window(40, 50, "login-cut", {Rule::kPhantom}),
                               window(51, 99, "hash-freeze", {Rule::kStale})})) ==
        "stale=1 unavailable=1");

  const Report r = judged(lines, {window(45, 46, "login-cut", {Rule::kPhantom}),
                                  window(49, 60, "hash-freeze", {Rule::kStale, Rule::kUnavailable}),
                                  window(0, 1000, "other", {Rule::kStale})});
  CHECK(outside(r) == "unavailable=1");
  CHECK(r.tally(Rule::kStale).inside == std::map<std::string, uint64_t>{{"hash-freeze", 1}});
  REQUIRE(r.tally(Rule::kStale).examples.size() == 1);
  CHECK(r.tally(Rule::kStale).examples[0].window == "hash-freeze");
  CHECK_FALSE(r.passed());

  std::vector<Window> all = {window(105, 105, "etcd-kill", {}), window(0, 50, "hash-kill", {})};
  all[0].excuses.fill(true);  // `*`
  all[1].excuses[static_cast<size_t>(Rule::kStale)] = true;
  const Report excused = judged(lines, all);
  CHECK(outside(excused) == "");
  CHECK(excused.passed());
  CHECK(excused.tally(Rule::kUnavailable).inside ==
        std::map<std::string, uint64_t>{{"etcd-kill", 1}});
  CHECK(render_text(excused).find("stale                  0         1  hash-kill=1") !=
        std::string::npos);
}

TEST_CASE("history checker: examples are the earliest, N outside and N inside, in the reports") {
  std::vector<std::string> lines;
  for (uint64_t i = 20; i > 0; --i)
    lines.push_back(at(i * 100, i * 100 + 1, "LOOKUP", "TIMEOUT", "-", i));
  History h;
  add_file(h, lines);
  const Report r = check(std::move(h), {window(0, 1000, "freeze", {Rule::kUnavailable})},
                         CheckOptions{.examples = 3});
  CHECK(r.tally(Rule::kUnavailable).outside == 10);
  CHECK(r.tally(Rule::kUnavailable).inside_total() == 10);
  std::vector<std::pair<uint64_t, std::string>> kept;
  for (const Example& e : r.tally(Rule::kUnavailable).examples)
    kept.emplace_back(e.user_id, e.window);
  CHECK(kept == std::vector<std::pair<uint64_t, std::string>>{
                    {1, "freeze"}, {2, "freeze"}, {3, "freeze"}, {11, ""}, {12, ""}, {13, ""}});

  const std::string text = render_text(r);
  CHECK(text.find("unavailable [inside freeze]: user 1: LOOKUP at 0.000..1.000 ms") !=
        std::string::npos);
  CHECK(text.find("result: FAILED (outside every window: unavailable=10)") != std::string::npos);
  const boost::json::object j = boost::json::parse(render_json(r)).as_object();
  CHECK(j.at("passed").as_bool() == false);
  CHECK(j.at("events").to_number<uint64_t>() == 20);
  CHECK(j.at("ops").at("LOOKUP").at("TIMEOUT").to_number<uint64_t>() == 20);
  const boost::json::object& u = j.at("rules").at("unavailable").as_object();
  CHECK(u.at("outside").to_number<uint64_t>() == 10);
  CHECK(u.at("inside").at("freeze").to_number<uint64_t>() == 10);
  CHECK(u.at("examples").as_array().size() == 6);
  CHECK(u.at("examples").as_array()[3].at("user").to_number<uint64_t>() == 11);
  CHECK(u.at("examples").as_array()[3].at("invoke_ms").as_double() == doctest::Approx(1000.0));
  CHECK(j.at("rules").at("no_reply").at("fails_run").as_bool() == false);
}

}  // namespace
}  // namespace imhash::history
