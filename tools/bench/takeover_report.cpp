#include "tools/bench/takeover_report.h"

#include <algorithm>
#include <map>

namespace imhash::bench::takeover {
namespace {

namespace json = boost::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

json::object spread(const std::vector<double>& v) {
  return {{"min", *std::min_element(v.begin(), v.end())},
          {"median", median(v)},
          {"max", *std::max_element(v.begin(), v.end())}};
}

template <typename T>
json::value or_null(const std::optional<T>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

std::string ms_text(const std::optional<double>& v) { return v ? format("%.0f", *v) : "-"; }

std::string joined(const std::vector<uint64_t>& v, const char* separator = ",") {
  std::string out;
  for (uint64_t n : v) out += (out.empty() ? "" : separator) + std::to_string(n);
  return out;
}

std::string text_of(const json::value& v) {
  return v.is_string() ? std::string(v.as_string()) : json::serialize(v);
}

// Requests of one op (or of all) that failed: statuses other than OK and NOT_FOUND, no reply
// after every try, unanswered at the end; and those statuses.
uint64_t failed(const std::map<std::string, uint64_t>& status, uint64_t no_reply,
                uint64_t abandoned, json::object* bad = nullptr) {
  uint64_t n = no_reply + abandoned;
  for (const auto& [name, count] : status) {
    if (name == "OK" || name == "NOT_FOUND" || count == 0) continue;
    n += count;
    if (bad) (*bad)[name] = count;
  }
  return n;
}

std::string counts_text(const json::object& o) {
  std::string out;
  for (const auto& [name, count] : o) {
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + text_of(count);
  }
  return out;
}

}  // namespace

void say_round(Context& ctx, const Round& r) {
  ctx.result.say(format(
      "round %d  %-7s cfg%d %3.0f ms after the start of imctl \"%s\" (at version %lu): "
      "takeover %5.0f ms (cfg%d), nodes back %5s ms;",
      r.number, r.term ? "SIGTERM" : "kill -9", r.killed, r.delay_ms, r.change.c_str(),
      static_cast<unsigned long>(r.before), r.takeover_ms, r.next, ms_text(r.nodes_ms).c_str()));
  ctx.result.say(format(
      "         change %s, in the history: %s; cfg%d a standby again %s ms after its restart",
      r.answer.c_str(), r.made.empty() ? "no" : ("yes (version " + joined(r.made) + ")").c_str(),
      r.killed, ms_text(r.standby_ms).c_str()));
}

json::object round_figures(const Round& r) {
  json::array made;
  for (uint64_t v : r.made) made.emplace_back(v);
  return {{"round", r.number},
          {"signal", r.term ? "TERM" : "KILL"},
          {"killed", "cfg" + std::to_string(r.killed)},
          {"kill_delay_ms", r.delay_ms},
          {"change", r.change},
          {"version_before", r.before},
          {"takeover_ms", r.takeover_ms},
          {"new_leader", "cfg" + std::to_string(r.next)},
          {"nodes_back_ms", or_null(r.nodes_ms)},
          {"acknowledged", r.acked.has_value()},
          {"acknowledged_version", or_null(r.acked)},
          {"in_history_versions", std::move(made)},
          {"standby_again_ms", or_null(r.standby_ms)},
          {"answer", r.answer}};
}

// The rounds' summary (bench.sh's report: takeover times against the TTL, nodes back, the
// changes in flight).
void report_rounds(Context& ctx, const std::vector<Round>& rows, int64_t ttl_s) {
  json::object& f = ctx.result.figures;
  const double ttl_ms = static_cast<double>(ttl_s) * 1000;
  std::vector<double> k, t, nb;
  json::array slow, term;
  for (const Round& r : rows) {
    (r.term ? t : k).push_back(r.takeover_ms);
    if (r.term) term.emplace_back(r.takeover_ms);
    if (!r.term && r.takeover_ms > 1.25 * ttl_ms + 250) slow.emplace_back(r.number);
    if (r.nodes_ms) nb.push_back(*r.nodes_ms);
  }
  if (!k.empty()) {
    json::object s = spread(k);
    s["rounds"] = k.size();
    f["takeover_kill_ms"] = s;
    f["takeover_kill_max_over_2ttl"] = s["max"].as_double() / (2 * ttl_ms);
    f["slow_kill_rounds"] = slow;
    ctx.result.say(
        format("takeover after kill -9: min %.0f ms  median %.0f ms  max %.0f ms  (%zu rounds; "
               "TTL %.0f ms: TTL x 1.25 %.0f ms, 2 x TTL %.0f ms; max / 2 x TTL %.2f)",
               s["min"].as_double(), s["median"].as_double(), s["max"].as_double(), k.size(),
               ttl_ms, 1.25 * ttl_ms, 2 * ttl_ms, s["max"].as_double() / (2 * ttl_ms)));
    if (!slow.empty()) {
      std::string list;
      for (const json::value& n : slow) list += (list.empty() ? "" : ", ") + text_of(n);
      ctx.result.say("   slower than TTL x 1.25 + 250 ms in round(s) " + list);
    }
  }
  if (!t.empty()) {
    std::string list;
    for (double x : t) list += (list.empty() ? "" : ", ") + format("%.0f", x);
    const double over = *std::max_element(t.begin(), t.end()) / (2 * ttl_ms);
    f["takeover_term_ms"] = term;
    f["takeover_term_max_over_2ttl"] = over;
    ctx.result.say(format("takeover after SIGTERM: %s ms  (%.2f of 2 x TTL)", list.c_str(), over));
  }
  if (!nb.empty()) {
    f["nodes_back_ms"] = spread(nb);
    ctx.result.say(format("nodes back (from the kill): min %.0f ms  median %.0f ms  max %.0f ms",
                          *std::min_element(nb.begin(), nb.end()), median(nb),
                          *std::max_element(nb.begin(), nb.end())));
  }
  size_t acked = 0, lost = 0, twice = 0, unacked_made = 0;
  for (const Round& r : rows) {
    twice += r.made.size() > 1;
    unacked_made += !r.acked && !r.made.empty();
    if (!r.acked) continue;
    ++acked;
    if (std::find(r.made.begin(), r.made.end(), *r.acked) != r.made.end()) continue;
    ++lost;
  }
  f["changes"] = {{"in_flight", rows.size()},
                  {"acknowledged", acked},
                  {"lost", lost},
                  {"not_acknowledged_made", unacked_made},
                  {"made_twice", twice}};
  ctx.result.say(
      format("changes in flight: %zu, acknowledged %zu (lost: %zu), not acknowledged but made "
             "%zu, made twice %zu",
             rows.size(), acked, lost, unacked_made, twice));
  for (const Round& r : rows) {
    if (!r.acked || std::find(r.made.begin(), r.made.end(), *r.acked) != r.made.end()) continue;
    ctx.result.say(format("   LOST: round %d: %s acknowledged as version %lu, history has it at %s",
                          r.number, r.change.c_str(), static_cast<unsigned long>(*r.acked),
                          r.made.empty() ? "-" : joined(r.made).c_str()));
  }
}

// Versions: 1..latest, each once.
void report_versions(Context& ctx, const json::value& history, const json::value& status) {
  std::map<uint64_t, size_t> seen;
  size_t entries = 0;
  for (const json::value& e : history.at("versions").as_array()) {
    ++seen[e.at("version").to_number<uint64_t>()];
    ++entries;
  }
  const uint64_t latest = status.at("version").to_number<uint64_t>();
  const uint64_t top = seen.empty() ? 0 : seen.rbegin()->first;
  std::vector<uint64_t> dup, missing;
  for (const auto& [v, n] : seen) {
    if (n > 1) dup.push_back(v);
  }
  for (uint64_t v = 1; v <= top; ++v) {
    if (!seen.count(v)) missing.push_back(v);
  }
  const bool once =
      entries > 0 && dup.empty() && missing.empty() && top == latest && entries == top;
  json::array dup_j, missing_j;
  for (uint64_t v : dup) dup_j.emplace_back(v);
  for (uint64_t v : missing) missing_j.emplace_back(v);
  ctx.result.figures["versions"] = {{"entries", entries},        {"highest", top},
                                    {"status_version", latest},  {"each_once", once},
                                    {"twice", std::move(dup_j)}, {"missing", std::move(missing_j)}};
  if (once) {
    ctx.result.say(format("versions: 1..%lu, each once", static_cast<unsigned long>(top)));
  } else {
    ctx.result.say(format(
        "versions: ANOMALY: history lists %zu entries, highest %lu, status version %lu; twice or "
        "more: %s; missing: %s",
        entries, static_cast<unsigned long>(top), static_cast<unsigned long>(latest),
        dup.empty() ? "none" : joined(dup, ", ").c_str(),
        missing.empty() ? "none" : joined(missing, ", ").c_str()));
  }
}

void report_load(Context& ctx, const UdpSimSummary& d) {
  json::object f = sim_figures(d);
  const test::UdpSimOp& lk = d.op("LOOKUP");
  json::object status, bad, by_op;
  for (const auto& [name, count] : d.status) {
    if (count) status[name] = count;
  }
  const uint64_t lookups_failed = failed(lk.status, lk.no_reply, lk.abandoned, &bad);
  for (const auto& [op, o] : d.ops) {
    if (const uint64_t n = failed(o.status, o.no_reply, o.abandoned)) by_op[op] = n;
  }
  const uint64_t requests_failed = failed(d.status, d.no_reply, d.abandoned);
  const uint64_t tries = d.json.at("retries").to_number<uint64_t>() + 1;
  ctx.result.say(format("load (udp_sim, %.1f s, %.0f requests/s): requests %lu, status %s",
                        d.elapsed_s, d.requests_per_s, static_cast<unsigned long>(d.requests),
                        counts_text(status).c_str()));
  ctx.result.say(format(
      "lookups failed: %lu  (of %lu sent; statuses other than OK/NOT_FOUND: %s; no reply after "
      "%lu tries %lu; unanswered at the end %lu; re-sent tries %lu)",
      static_cast<unsigned long>(lookups_failed), static_cast<unsigned long>(lk.requests),
      bad.empty() ? "none" : counts_text(bad).c_str(), static_cast<unsigned long>(tries),
      static_cast<unsigned long>(lk.no_reply), static_cast<unsigned long>(lk.abandoned),
      static_cast<unsigned long>(lk.retries)));
  ctx.result.say(format("requests failed: %lu (%s)", static_cast<unsigned long>(requests_failed),
                        by_op.empty() ? "none" : counts_text(by_op).c_str()));
  const test::UdpSimVerify& v = d.verify;
  ctx.result.say(format("verify: %s  verify_failed %lu  verified_ok %lu  unjudged %lu",
                        v.result.c_str(), static_cast<unsigned long>(v.verify_failed),
                        static_cast<unsigned long>(v.verified_ok),
                        static_cast<unsigned long>(v.unjudged)));
  for (size_t i = 0; i < v.failures.size() && i < 5; ++i) {
    const json::value& e = v.failures[i];
    ctx.result.say(format("   failure: user %s %s: expected %s, got %s",
                          text_of(e.at("user")).c_str(), text_of(e.at("op")).c_str(),
                          text_of(e.at("expected")).c_str(), text_of(e.at("got")).c_str()));
  }
  ctx.result.say(format(
      "latency: max %lu us (lookups %lu us)  p99 %lu us  p999 %lu us",
      static_cast<unsigned long>(d.latency_us.max), static_cast<unsigned long>(lk.latency_us.max),
      static_cast<unsigned long>(d.latency_us.p99), static_cast<unsigned long>(d.latency_us.p999)));
  f["status"] = std::move(status);
  f["lookups_sent"] = lk.requests;
  f["lookups_failed"] = lookups_failed;
  f["lookup_other_statuses"] = std::move(bad);
  f["lookup_no_reply"] = lk.no_reply;
  f["lookup_abandoned"] = lk.abandoned;
  f["lookup_retries"] = lk.retries;
  f["lookup_max_us"] = lk.latency_us.max;
  f["requests_failed"] = requests_failed;
  f["requests_failed_by_op"] = std::move(by_op);
  f["verify"] = {{"result", v.result},
                 {"verify_failed", v.verify_failed},
                 {"verified_ok", v.verified_ok},
                 {"unjudged", v.unjudged}};
  ctx.result.figures["load"] = std::move(f);
}

}  // namespace imhash::bench::takeover
