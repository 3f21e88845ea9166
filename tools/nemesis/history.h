// The inputs of the history checker (issue 33, point 4): the history a client records (one Event a
// request), the rules the checker judges it by, and the windows a fault run excuses. Plain values
// and parsers over a caller's stream: no socket, no clock, no log. Any thread may call any of them;
// the objects are not shared.
//
// History file, version 1. Text lines, each ending in '\n' (a last line without one is a truncated
// file, refused: its last field may be cut short and still parse):
//   # imhash-history 1                                     the first line, exactly
//   # anything                                             comments, anywhere after it
//   <invoke_ns> <complete_ns> <op> <user_id> <status> <endpoint>
// Six fields separated by single spaces; no blank lines.
// - invoke_ns, complete_ns: unsigned decimal nanoseconds of CLOCK_MONOTONIC (steady_clock on Linux:
//   one clock for every process and network namespace of a machine, so the histories of several
//   clients on one machine can be merged). invoke: when the request was first sent; complete: when
//   its reply arrived, or when the client gave up on it (status `none`). complete >= invoke.
// - op: LOGIN, HEARTBEAT, LOOKUP or LOGOUT (client::to_string(Op)).
// - user_id: unsigned 64-bit decimal.
// - status: a name of client::to_string(Status) (OK, NOT_FOUND, ...), or `none`: no reply after
//   every try, the outcome is unknown.
// - endpoint: LOGIN, HEARTBEAT: the endpoint the request carried (the value written); LOOKUP: the
//   ENDPOINT of the answer, `-` when it had none; LOGOUT: `-`. As Endpoint::to_string() writes it
//   ("10.0.0.7:4242", "[2001:db8::1]:443"). A client gives every LOGIN and HEARTBEAT of a user an
//   endpoint of its own, so that reading an overwritten value is visible.
// Anything else is an InputError naming the file and line: the checker refuses a history rather
// than guess what a line meant.
//
// Windows file: `#` comments and blank lines, and one window a line:
//   <start_ns> <end_ns> <kind> <rules>
// start_ns <= end_ns (the clock of the history), kind a word naming the fault ("hash-freeze",
// "login-cut": letters, digits, '-', '_', '.'), rules the comma-separated names of the rules it
// excuses ("stale,unavailable") or `*` for every rule.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/codec/endpoint.h"

namespace imhash::history {

inline constexpr std::string_view kHeaderLine = "# imhash-history 1";

// One request of a history: a line of a history file.
struct Event {
  uint64_t invoke_ns = 0;
  uint64_t complete_ns = 0;
  uint64_t user_id = 0;
  Endpoint endpoint;  // family 0: `-`
  client::Op op = client::Op::kLookup;
  std::optional<client::Status> status;  // nullopt: `none`, no reply
  uint16_t file = 0;                     // index into History::files
  uint32_t line = 0;                     // 1-based line in that file

  bool written() const { return op != client::Op::kLookup; }  // LOGIN, HEARTBEAT, LOGOUT
};

// The events of one or more history files (the clients of a run), in file order.
struct History {
  std::vector<std::string> files;  // names, for "FILE:LINE" in messages
  std::vector<Event> events;
};

// What is wrong with an input file, and where: "FILE:LINE: message" (line 0: the file as a whole).
struct InputError {
  std::string file;
  uint32_t line = 0;
  std::string message;

  std::string to_string() const;
};

// Reads one history file from `in` into `into` (its events appended, `file` added to the names).
// On an error `into` may hold part of the file: callers stop there.
std::optional<InputError> parse_history(std::istream& in, std::string_view file, History& into);
// The same from a file on disk; an unreadable file is an InputError too.
std::optional<InputError> read_history_file(const std::string& path, History& into);

// `e` as a line of a history file, '\n' included (file and line are not written).
void append_line(std::string& out, const Event& e);

// The rules, in the order of the report; the names are those of windows files and reports.
enum class Rule : uint8_t {
  kPhantom,       // LOOKUP OK with an endpoint no write (before it completed) carries
  kStale,         // LOOKUP OK with an endpoint an acknowledged write had overwritten
  kLogoutUndone,  // LOOKUP OK with an endpoint an acknowledged LOGOUT had removed
  kWriteLost,     // LOOKUP NOT_FOUND after an acknowledged write that nothing may have removed
  kUnavailable,   // a request answered UNAVAILABLE or TIMEOUT
  kNoReply,       // a request with no reply at all (reported; does not fail a run by itself)
};
inline constexpr size_t kRuleCount = 6;
inline constexpr std::array<Rule, kRuleCount> kRules = {Rule::kPhantom,      Rule::kStale,
                                                        Rule::kLogoutUndone, Rule::kWriteLost,
                                                        Rule::kUnavailable,  Rule::kNoReply};
const char* to_string(Rule r);

// A time during which the run expects some anomalies (a fault, and what the design allows while it
// lasts), from the nemesis.
struct Window {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string kind;
  std::array<bool, kRuleCount> excuses{};  // by Rule

  bool excuses_rule(Rule r) const { return excuses[static_cast<size_t>(r)]; }
};

// Reads a windows file from `in`, appending to `into`.
std::optional<InputError> parse_windows(std::istream& in, std::string_view file,
                                        std::vector<Window>& into);
std::optional<InputError> read_windows_file(const std::string& path, std::vector<Window>& into);

}  // namespace imhash::history
