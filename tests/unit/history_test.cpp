// The inputs of the history checker (tools/nemesis/history.h): the history lines append_line
// writes are what parse_history reads, and a malformed history or windows file is refused with the
// file and line named.
#include "tools/nemesis/history.h"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

namespace imhash::history {
namespace {

const std::string kHeader = std::string(kHeaderLine) + "\n";

// A malformed input and how its error message begins.
struct BadInput {
  std::string input;
  std::string message;
};

std::optional<InputError> history_error(const std::string& body) {
  History h;
  std::istringstream in(body);
  return parse_history(in, "h.hist", h);
}

std::optional<InputError> windows_error(const std::string& body) {
  std::vector<Window> w;
  std::istringstream in(body);
  return parse_windows(in, "w.txt", w);
}

TEST_CASE("history: append_line writes what parse_history reads") {
  Event e{.invoke_ns = 5,
          .complete_ns = 18446744073709551615u,
          .user_id = 18446744073709551615u,
          .endpoint = *parse_endpoint("[2001:db8::1]:443"),
          .op = client::Op::kHeartbeat,
          .status = client::Status::kRateLimited};
  Event lookup;  // at 0, user 0: a LOOKUP with no reply, so no endpoint
  lookup.op = client::Op::kLookup;
  std::string text = kHeader;
  append_line(text, e);
  append_line(text, lookup);
  CHECK(text == kHeader +
                    "5 18446744073709551615 HEARTBEAT 18446744073709551615 RATE_LIMITED "
                    "[2001:db8::1]:443\n0 0 LOOKUP 0 none -\n");
  History h;
  std::istringstream in(text);
  REQUIRE_FALSE(parse_history(in, "x", h));
  REQUIRE(h.events.size() == 2);
  e.line = 2;
  lookup.line = 3;
  for (size_t i = 0; i < 2; ++i) {
    const Event& want = i == 0 ? e : lookup;
    CHECK(h.events[i].invoke_ns == want.invoke_ns);
    CHECK(h.events[i].complete_ns == want.complete_ns);
    CHECK(h.events[i].user_id == want.user_id);
    CHECK(h.events[i].endpoint == want.endpoint);
    CHECK(h.events[i].op == want.op);
    CHECK(h.events[i].status == want.status);
    CHECK(h.events[i].line == want.line);
  }
}

TEST_CASE("history: a malformed file is refused, naming the file and the line") {
  const std::string ok = "0 1 LOGIN 7 OK 10.0.0.1:1\n";
  const BadInput cases[] = {
      {"", "h.hist:1: empty file"},
      {"# imhash-history 2\n", "h.hist:1: the first line must be '# imhash-history 1'"},
      {ok, "h.hist:1: the first line must be"},
      {kHeader + ok + "0 1 LOGIN 7 OK\n", "h.hist:3: expected 6 fields"},
      {kHeader + ok + "0 1  LOGIN 7 OK 10.0.0.1:1\n", "h.hist:3: expected 6 fields"},
      {kHeader + ok + "0 1 LOGIN 7 OK 10.0.0.1:1 \n", "h.hist:3: expected 6 fields"},
      {kHeader + ok + "\n", "h.hist:3: an empty line"},
      {kHeader + "# c\n" + ok + "0 1 PING 0 OK -\n", "h.hist:4: unknown op 'PING'"},
      {kHeader + ok + "0 1 LOGIN 7 GONE 10.0.0.1:1\n", "h.hist:3: unknown status 'GONE'"},
      {kHeader + ok + "0 1 LOGIN 7 OK localhost:1\n", "h.hist:3: endpoint 'localhost:1'"},
      {kHeader + ok + "0 1 LOGIN 7 OK 10.0.0.1:1\r\n", "h.hist:3: endpoint '10.0.0.1:1\r'"},
      {kHeader + ok + "5 4 LOGIN 7 OK 10.0.0.1:1\n",
       "h.hist:3: complete_ns 4 is before invoke_ns 5"},
      {kHeader + ok + "-1 4 LOGIN 7 OK 10.0.0.1:1\n", "h.hist:3: invoke_ns '-1'"},
      {kHeader + ok + "1 x LOGIN 7 OK 10.0.0.1:1\n", "h.hist:3: complete_ns 'x'"},
      {kHeader + ok + "0 1 LOGIN 18446744073709551616 OK 10.0.0.1:1\n", "h.hist:3: user_id"},
      {kHeader + ok + "0 1 HEARTBEAT 7 OK -\n", "h.hist:3: HEARTBEAT without the endpoint"},
      {kHeader + ok + "0 1 LOGOUT 7 OK 10.0.0.1:1\n", "h.hist:3: LOGOUT with an endpoint"},
      {kHeader + ok + "0 1 LOGIN 7 OK 10.0.0.1:12", "h.hist:3: the last line does not end"},
  };
  for (const BadInput& c : cases) {
    CAPTURE(c.input);
    const std::optional<InputError> error = history_error(c.input);
    REQUIRE(error);
    CHECK(error->to_string().substr(0, c.message.size()) == c.message);
  }
  CHECK_FALSE(history_error(kHeader + "# only comments\n"));
  History h;
  const std::optional<InputError> missing = read_history_file("/nonexistent/h.hist", h);
  REQUIRE(missing);
  CHECK(missing->to_string() == "/nonexistent/h.hist: cannot open the file");
}

TEST_CASE("history: windows files") {
  std::vector<Window> w;
  std::istringstream in(
      "# start end kind rules\n\n10 20 hash-freeze stale,unavailable\n5 5 etcd.kill_2 *\n");
  REQUIRE_FALSE(parse_windows(in, "w.txt", w));
  REQUIRE(w.size() == 2);
  CHECK(w[0].start_ns == 10);
  CHECK(w[0].end_ns == 20);
  CHECK(w[0].kind == "hash-freeze");
  CHECK(w[0].excuses_rule(Rule::kStale));
  CHECK(w[0].excuses_rule(Rule::kUnavailable));
  CHECK_FALSE(w[0].excuses_rule(Rule::kPhantom));
  for (Rule r : kRules) CHECK(w[1].excuses_rule(r));

  const BadInput cases[] = {
      {"1 2 cut\n", "w.txt:1: expected 4 fields"},
      {"# c\n3 2 cut stale\n", "w.txt:2: end_ns 2 is before start_ns 3"},
      {"x 2 cut stale\n", "w.txt:1: start_ns 'x'"},
      {"1 2 cut stale,lost\n", "w.txt:1: unknown rule 'lost'"},
      {"1 2 cut stale,\n", "w.txt:1: unknown rule ''"},
      {"1 2 cut/x stale\n", "w.txt:1: kind 'cut/x' is not a word"},
  };
  for (const BadInput& c : cases) {
    CAPTURE(c.input);
    const std::optional<InputError> error = windows_error(c.input);
    REQUIRE(error);
    CHECK(error->to_string().substr(0, c.message.size()) == c.message);
  }
}

}  // namespace
}  // namespace imhash::history
