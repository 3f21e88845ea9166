// The history checker (issue 33, point 4): judges every answer of a recorded client history
// (tools/nemesis/history.h) against what was acknowledged before it, per user, and counts each
// anomaly against the run or against the window of a fault that excuses it. A pure function of its
// inputs: no socket, no clock, no log; any thread may call it.
//
// The model (the spec the rules below implement). Per user, the record is a register: LOGIN and
// HEARTBEAT write their endpoint, LOGOUT writes "absent" (⊥); before any write it is ⊥. A write is
// - acknowledged when its status is OK (a LOGOUT too: the login server answers OK for a LOGOUT of
//   a user the hash server has no record of);
// - not applied when its status is BAD_REQUEST, UNAUTHORIZED, RATE_LIMITED or UNSUPPORTED_VERSION
//   (the login server refused it before anything was stored); it is left out of every rule;
// - indeterminate otherwise (UNAVAILABLE, TIMEOUT, no reply, NOT_FOUND): it may take effect at any
//   time after its invoke, or never (as Jepsen's Knossos treats an :info op), so its completion is
//   taken as +infinity.
// Write w precedes w' when complete(w) < invoke(w'). A LOOKUP r answered OK with endpoint v, or
// NOT_FOUND (⊥), is judged; LOOKUPs with other statuses are not judged by rules 1-4.
//   1. phantom: OK with an endpoint that no applied-or-indeterminate LOGIN/HEARTBEAT of the user
//      carries, or only writes invoked after r completed (a value from nowhere or from the future);
//      an OK without an endpoint too.
//   2. stale: OK with v, and every write w of v (the read is fine if ANY write of v survives) is
//      overwritten before r: some acknowledged write w' of another value (an endpoint, or ⊥) with w
//      precedes w' and complete(w') < invoke(r).
//   3. logout_undone: as stale, but an acknowledged LOGOUT is among the overwriters (reported
//      instead of stale).
//   4. write_lost: NOT_FOUND although every ⊥-write (the initial state, complete = -infinity, and
//      every acknowledged or indeterminate LOGOUT invoked before r completed) is overwritten before
//      r by an acknowledged LOGIN/HEARTBEAT.
//   5. unavailable: any request answered UNAVAILABLE or TIMEOUT; no_reply: any request without a
//      reply. no_reply is reported but does not fail a run by itself: a lossy link between client
//      and login server loses replies by design, and the client cannot tell that from a fault.
// An anomaly whose request interval [invoke, complete] overlaps a window that excuses its rule is
// counted inside that window (the first such window of the file), by the window's kind, not
// against the run. passed(): no anomaly of rules 1-4 and no unavailable outside every window.
//
// Cost: the events are sorted by user, then invoke; each judged LOOKUP looks at its user's events
// up to its own completion, so O(n^2) for a user with n events (hundreds in a run), linear in
// users.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/nemesis/history.h"

namespace imhash::history {

struct CheckOptions {
  size_t examples = 10;  // per rule, outside windows and again inside
};

// One anomaly, in words, for a person reading the report.
struct Example {
  uint64_t user_id = 0;
  uint64_t invoke_ns = 0;  // of the request judged (the clock of the history)
  std::string window;      // the kind of the window it falls in; empty: outside every window
  std::string text;        // the request and the write(s) that make it wrong, times in ms
};

struct RuleTally {
  uint64_t outside = 0;                    // counted against the run
  std::map<std::string, uint64_t> inside;  // excused, by window kind
  std::vector<Example> examples;           // by invoke: the earliest N outside, N inside

  uint64_t inside_total() const;
};

// Columns of Report::ops: the statuses by value (OK = 0 ... UNSUPPORTED_VERSION = 7), then none.
inline constexpr size_t kStatusColumns = 9;
inline constexpr size_t kNoReplyColumn = 8;
// Rows of Report::ops: LOGIN, HEARTBEAT, LOOKUP, LOGOUT (Op value - 1).
inline constexpr size_t kOpRows = 4;

struct Report {
  size_t files = 0;
  size_t events = 0;
  size_t users = 0;
  size_t windows = 0;
  uint64_t first_invoke_ns = 0;  // example times are in ms after this
  uint64_t last_complete_ns = 0;
  std::array<std::array<uint64_t, kStatusColumns>, kOpRows> ops{};  // [op][status]
  uint64_t judged_lookups = 0;                                      // by rules 1-4
  std::array<RuleTally, kRuleCount> rules;

  const RuleTally& tally(Rule r) const { return rules[static_cast<size_t>(r)]; }
  bool passed() const;
};

// Judges `history` (its events are sorted in the copy taken) against `windows`.
Report check(History history, const std::vector<Window>& windows, const CheckOptions& options = {});

// The report for a person (several lines, ending in '\n'), and as one JSON object:
//   {passed, files, events, users, windows, duration_ms, judged_lookups,
//    ops {LOGIN|HEARTBEAT|LOOKUP|LOGOUT: {OK: n, ..., none: n}} (statuses that occurred),
//    rules {phantom|stale|...: {outside, inside {KIND: n}, fails_run,
//           examples [{user, invoke_ms, window, text}]}}}
std::string render_text(const Report& report);
std::string render_json(const Report& report);

}  // namespace imhash::history
