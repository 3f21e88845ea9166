// The history checker's report as text and as JSON (declared in history_checker.h).
#include <fmt/format.h>

#include <boost/json.hpp>

#include "tools/nemesis/history_checker.h"

namespace imhash::history {

namespace {

const char* column_name(size_t column) {
  return column == kNoReplyColumn ? "none" : client::to_string(static_cast<client::Status>(column));
}
const char* row_name(size_t row) { return client::to_string(static_cast<client::Op>(row + 1)); }

bool fails_run(Rule r) { return r != Rule::kNoReply; }

double duration_ms(const Report& r) {
  return r.events == 0 ? 0.0 : static_cast<double>(r.last_complete_ns - r.first_invoke_ns) / 1e6;
}

// "hash-freeze=3 login-cut=1", or "" when nothing was inside a window.
std::string by_kind(const RuleTally& t) {
  std::string out;
  for (const auto& [kind, count] : t.inside) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}={}", kind, count);
  }
  return out;
}

}  // namespace

std::string render_text(const Report& r) {
  std::string out =
      fmt::format("history: {} requests of {} users in {} file(s), over {:.3f} s; {} window(s)\n",
                  r.events, r.users, r.files, duration_ms(r) / 1e3, r.windows);
  for (size_t row = 0; row < kOpRows; ++row) {
    uint64_t total = 0;
    std::string statuses;
    for (size_t c = 0; c < kStatusColumns; ++c) {
      if (r.ops[row][c] == 0) continue;
      total += r.ops[row][c];
      statuses += fmt::format(" {}={}", column_name(c), r.ops[row][c]);
    }
    out += fmt::format("  {:<10}{:>10}{}\n", row_name(row), total, statuses);
  }
  out += fmt::format("lookups judged (OK or NOT_FOUND): {}\n", r.judged_lookups);
  out += fmt::format("{:<16}{:>10}{:>10}\n", "anomalies", "outside", "inside");
  for (Rule rule : kRules) {
    const RuleTally& t = r.tally(rule);
    const std::string kinds = by_kind(t);
    out += fmt::format("  {:<14}{:>10}{:>10}{}{}\n", to_string(rule), t.outside, t.inside_total(),
                       kinds.empty() ? "" : "  " + kinds,
                       fails_run(rule) ? "" : "  (reported; does not fail the run)");
  }
  bool header = false;
  for (Rule rule : kRules) {
    for (const Example& e : r.tally(rule).examples) {
      if (!header) out += "examples (times in ms after the first request):\n";
      header = true;
      out += fmt::format("  {}{}: {}\n", to_string(rule),
                         e.window.empty() ? "" : " [inside " + e.window + "]", e.text);
    }
  }
  std::string failed;
  for (Rule rule : kRules) {
    if (!fails_run(rule) || r.tally(rule).outside == 0) continue;
    failed +=
        fmt::format("{}{}={}", failed.empty() ? "" : " ", to_string(rule), r.tally(rule).outside);
  }
  out +=
      r.passed() ? "result: passed\n" : "result: FAILED (outside every window: " + failed + ")\n";
  return out;
}

std::string render_json(const Report& r) {
  boost::json::object ops;
  for (size_t row = 0; row < kOpRows; ++row) {
    boost::json::object statuses;
    for (size_t c = 0; c < kStatusColumns; ++c) {
      if (r.ops[row][c] != 0) statuses[column_name(c)] = r.ops[row][c];
    }
    ops[row_name(row)] = std::move(statuses);
  }
  boost::json::object rules;
  for (Rule rule : kRules) {
    const RuleTally& t = r.tally(rule);
    boost::json::object inside;
    for (const auto& [kind, count] : t.inside) inside[kind] = count;
    boost::json::array examples;
    for (const Example& e : t.examples) {
      examples.push_back(boost::json::object{
          {"user", e.user_id},
          {"invoke_ms", static_cast<double>(e.invoke_ns - r.first_invoke_ns) / 1e6},
          {"window", e.window},
          {"text", e.text}});
    }
    rules[to_string(rule)] = boost::json::object{{"outside", t.outside},
                                                 {"inside", std::move(inside)},
                                                 {"fails_run", fails_run(rule)},
                                                 {"examples", std::move(examples)}};
  }
  const boost::json::object o{{"passed", r.passed()},
                              {"files", r.files},
                              {"events", r.events},
                              {"users", r.users},
                              {"windows", r.windows},
                              {"duration_ms", duration_ms(r)},
                              {"judged_lookups", r.judged_lookups},
                              {"ops", std::move(ops)},
                              {"rules", std::move(rules)}};
  return boost::json::serialize(o);
}

}  // namespace imhash::history
