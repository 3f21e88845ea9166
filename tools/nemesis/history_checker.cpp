#include "tools/nemesis/history_checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <span>
#include <tuple>

namespace imhash::history {

using client::Op;
using client::Status;

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();  // an indeterminate completion

enum class Effect : uint8_t { kAcknowledged, kNotApplied, kIndeterminate };

Effect effect_of(const Event& w) {
  if (!w.status) return Effect::kIndeterminate;
  switch (*w.status) {
    case Status::kOk:
      return Effect::kAcknowledged;
    case Status::kBadRequest:
    case Status::kUnauthorized:
    case Status::kRateLimited:
    case Status::kUnsupportedVersion:
      return Effect::kNotApplied;
    case Status::kNotFound:
    case Status::kUnavailable:
    case Status::kTimeout:
      break;
  }
  return Effect::kIndeterminate;
}

bool writes_endpoint(const Event& e) { return e.op == Op::kLogin || e.op == Op::kHeartbeat; }
bool acknowledged(const Event& w) { return effect_of(w) == Effect::kAcknowledged; }
// When a write is known to have taken effect by: its reply, or never (+infinity).
uint64_t settled_ns(const Event& w) { return acknowledged(w) ? w.complete_ns : kNever; }

// Counts anomalies into the report, each against the run or the first window excusing it, and
// keeps the earliest as examples, rendered in words only when kept.
class Tally {
 public:
  Tally(const History& h, const std::vector<Window>& windows, const CheckOptions& options,
        Report& report)
      : history_(h), windows_(windows), options_(options), report_(report) {}

  template <typename Words>
  void add(Rule rule, const Event& request, Words words) {
    RuleTally& t = report_.rules[static_cast<size_t>(rule)];
    const Window* window = excusing(rule, request);
    if (window) {
      ++t.inside[window->kind];
    } else {
      ++t.outside;
    }
    keep(t.examples, window, request, words);
  }

  // "LOGIN 10.0.0.7:4242 at 12.000..13.500 ms answered OK (client1.hist:17)".
  std::string describe(const Event& e) const {
    std::string out = client::to_string(e.op);
    if (e.written() && e.endpoint.valid()) out.append(" ").append(e.endpoint.to_string());
    out += fmt::format(" at {:.3f}..{:.3f} ms", ms(e.invoke_ns), ms(e.complete_ns));
    if (!e.status) {
      out += " got no reply";
    } else {
      out.append(" answered ").append(client::to_string(*e.status));
      if (!e.written() && e.endpoint.valid()) out.append(" ").append(e.endpoint.to_string());
    }
    return out + fmt::format(" ({}:{})", history_.files[e.file], e.line);
  }

 private:
  double ms(uint64_t ns) const { return static_cast<double>(ns - report_.first_invoke_ns) / 1e6; }

  const Window* excusing(Rule rule, const Event& e) const {
    for (const Window& w : windows_) {
      if (w.excuses_rule(rule) && w.start_ns <= e.complete_ns && e.invoke_ns <= w.end_ns) {
        return &w;
      }
    }
    return nullptr;
  }

  // Examples stay sorted by invoke; outside and inside windows each keep their earliest N.
  template <typename Words>
  void keep(std::vector<Example>& examples, const Window* window, const Event& e, Words words) {
    const bool inside = window != nullptr;
    auto later = [&](const Example& x) {
      return x.invoke_ns > e.invoke_ns || (x.invoke_ns == e.invoke_ns && x.user_id > e.user_id);
    };
    size_t same_side = 0;
    const Example* last_same = nullptr;
    for (const Example& x : examples) {
      if (x.window.empty() == inside) continue;
      ++same_side;
      last_same = &x;
    }
    if (same_side >= options_.examples && (last_same == nullptr || !later(*last_same))) return;
    const auto at = std::find_if(examples.begin(), examples.end(), later);
    examples.insert(at, Example{e.user_id, e.invoke_ns, inside ? window->kind : "",
                                "user " + std::to_string(e.user_id) + ": " + words()});
    if (same_side >= options_.examples) {  // drop the latest of this side
      for (auto it = examples.end(); it != examples.begin();) {
        --it;
        if (it->window.empty() != inside) {
          examples.erase(it);
          break;
        }
      }
    }
  }

  const History& history_;
  const std::vector<Window>& windows_;
  const CheckOptions& options_;
  Report& report_;
};

// Rules 1-3 for a LOOKUP `r` answered OK; `user` holds the user's events sorted by invoke.
void judge_value(std::span<const Event> user, const Event& r, Tally& tally) {
  const auto words = [&](const std::string& why) { return tally.describe(r) + ", " + why; };
  if (!r.endpoint.valid()) {
    tally.add(Rule::kPhantom, r, [&] { return words("OK without an endpoint"); });
    return;
  }
  const Event* best =
      nullptr;  // the write of v that is settled last: if it is overwritten, all are
  const Event* future = nullptr;
  const Event* refused = nullptr;
  for (const Event& w : user) {
    if (!writes_endpoint(w) || w.endpoint != r.endpoint) continue;
    if (effect_of(w) == Effect::kNotApplied) {
      refused = refused ? refused : &w;
    } else if (w.invoke_ns > r.complete_ns) {
      future = future ? future : &w;
    } else if (best == nullptr || settled_ns(w) > settled_ns(*best)) {
      best = &w;
    }
  }
  if (best == nullptr) {
    tally.add(Rule::kPhantom, r, [&] {
      if (future) return words("an endpoint only written later, by " + tally.describe(*future));
      if (refused)
        return words("an endpoint only a refused write carries: " + tally.describe(*refused));
      return words("an endpoint no write of the user carries");
    });
    return;
  }
  const Event* by_write = nullptr;  // the overwriters settled last before r began
  const Event* by_logout = nullptr;
  for (const Event& w : user) {
    if (w.invoke_ns >= r.invoke_ns) break;  // w cannot complete before r begins
    if (!w.written() || !acknowledged(w) || w.complete_ns >= r.invoke_ns) continue;
    if (writes_endpoint(w) && w.endpoint == r.endpoint) continue;
    if (settled_ns(*best) >= w.invoke_ns) continue;  // best does not precede w
    const Event*& by = w.op == Op::kLogout ? by_logout : by_write;
    if (by == nullptr || w.complete_ns > by->complete_ns) by = &w;
  }
  if (by_logout) {
    tally.add(Rule::kLogoutUndone, r, [&] {
      return words("written by " + tally.describe(*best) + ", which " + tally.describe(*by_logout) +
                   " had removed before the lookup began");
    });
  } else if (by_write) {
    tally.add(Rule::kStale, r, [&] {
      return words("written by " + tally.describe(*best) + ", which " + tally.describe(*by_write) +
                   " had overwritten before the lookup began");
    });
  }
}

// Rule 4 for a LOOKUP `r` answered NOT_FOUND.
void judge_absent(std::span<const Event> user, const Event& r, Tally& tally) {
  const Event* last_logout = nullptr;  // the ⊥-write settled last; none: only the initial state
  for (const Event& w : user) {
    if (w.invoke_ns > r.complete_ns) break;
    if (w.op != Op::kLogout) continue;
    const Effect effect = effect_of(w);
    // It may take effect just before r, so nothing overwrites it for certain.
    if (effect == Effect::kIndeterminate) return;
    if (effect == Effect::kAcknowledged &&
        (last_logout == nullptr || w.complete_ns > last_logout->complete_ns)) {
      last_logout = &w;
    }
  }
  const Event* by = nullptr;  // the acknowledged write that follows it, settled last before r
  for (const Event& w : user) {
    if (w.invoke_ns >= r.invoke_ns) break;
    if (!writes_endpoint(w) || !acknowledged(w) || w.complete_ns >= r.invoke_ns) continue;
    if (last_logout && last_logout->complete_ns >= w.invoke_ns) continue;
    if (by == nullptr || w.complete_ns > by->complete_ns) by = &w;
  }
  if (by == nullptr) return;
  tally.add(Rule::kWriteLost, r, [&] {
    return tally.describe(r) + ", but " + tally.describe(*by) +
           " was acknowledged before the lookup began, " +
           (last_logout ? "after " + tally.describe(*last_logout)
                        : std::string("with no LOGOUT before it"));
  });
}

void judge_user(std::span<const Event> user, Tally& tally, Report& report) {
  for (const Event& e : user) {
    if (!e.status) {
      tally.add(Rule::kNoReply, e, [&] { return tally.describe(e); });
      continue;
    }
    if (*e.status == Status::kUnavailable || *e.status == Status::kTimeout) {
      tally.add(Rule::kUnavailable, e, [&] { return tally.describe(e); });
    }
    if (e.op != Op::kLookup) continue;
    if (*e.status == Status::kOk) {
      ++report.judged_lookups;
      judge_value(user, e, tally);
    } else if (*e.status == Status::kNotFound) {
      ++report.judged_lookups;
      judge_absent(user, e, tally);
    }
  }
}

}  // namespace

uint64_t RuleTally::inside_total() const {
  uint64_t n = 0;
  for (const auto& [kind, count] : inside) n += count;
  return n;
}

bool Report::passed() const {
  for (Rule r :
       {Rule::kPhantom, Rule::kStale, Rule::kLogoutUndone, Rule::kWriteLost, Rule::kUnavailable}) {
    if (tally(r).outside > 0) return false;
  }
  return true;
}

Report check(History history, const std::vector<Window>& windows, const CheckOptions& options) {
  Report report;
  report.files = history.files.size();
  report.events = history.events.size();
  report.windows = windows.size();
  std::vector<Event>& events = history.events;
  if (!events.empty()) report.first_invoke_ns = kNever;
  for (const Event& e : events) {
    report.first_invoke_ns = std::min(report.first_invoke_ns, e.invoke_ns);
    report.last_complete_ns = std::max(report.last_complete_ns, e.complete_ns);
    const size_t column = e.status ? static_cast<size_t>(*e.status) : kNoReplyColumn;
    ++report.ops[static_cast<size_t>(e.op) - 1][column];
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.user_id, a.invoke_ns, a.complete_ns, a.file, a.line) <
           std::tie(b.user_id, b.invoke_ns, b.complete_ns, b.file, b.line);
  });
  Tally tally(history, windows, options, report);
  for (auto begin = events.begin(); begin != events.end();) {
    const auto end = std::find_if(begin, events.end(),
                                  [&](const Event& e) { return e.user_id != begin->user_id; });
    judge_user(std::span<const Event>(begin, end), tally, report);
    ++report.users;
    begin = end;
  }
  return report;
}

}  // namespace imhash::history
