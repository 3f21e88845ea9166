#include "tools/udp_sim/report.h"

#include <boost/json.hpp>
#include <cinttypes>

namespace imhash::sim {

using client::Status;

namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, fmt, args...);
  return std::string(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

std::string u64(uint64_t v) { return std::to_string(v); }

bool protocol_violations(const Counters& c) {
  return c.amplified_replies > 0 || c.mismatched_replies > 0 || c.malformed_replies > 0;
}

constexpr Status status_at(size_t i) { return static_cast<Status>(i); }

boost::json::object latency_json(const LatencyHistogram& h) {
  return {{"count", h.count()},         {"min", h.min()},          {"mean", h.mean()},
          {"p50", h.percentile(50)},    {"p90", h.percentile(90)}, {"p99", h.percentile(99)},
          {"p999", h.percentile(99.9)}, {"max", h.max()}};
}

boost::json::object status_json(const std::array<uint64_t, kStatusCount>& s) {
  boost::json::object o;
  for (size_t i = 0; i < kStatusCount; ++i) o[client::to_string(status_at(i))] = s[i];
  return o;
}

// "OK=5 NOT_FOUND=2", statuses that are not zero ("-" when none).
std::string nonzero_statuses(const std::array<uint64_t, kStatusCount>& s) {
  std::string out;
  for (size_t i = 0; i < kStatusCount; ++i) {
    if (s[i] == 0) continue;
    if (!out.empty()) out += ' ';
    out += std::string(client::to_string(status_at(i))) + "=" + u64(s[i]);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

int exit_code_for(bool verify, const Counters& c, const VerifyCounts& v) {
  if (verify && (v.verify_failed > 0 || protocol_violations(c))) return 1;
  if (c.requests() > 0 && c.replies() == 0) return 69;  // EX_UNAVAILABLE
  if (verify && v.verified_ok == 0) return 2;
  return 0;
}

const char* verify_result(bool verify, const Counters& c, const VerifyCounts& v) {
  if (!verify) return "off";
  if (v.verify_failed > 0 || protocol_violations(c)) return "fail";
  if (v.verified_ok == 0) return "nothing_verified";
  return "pass";
}

std::string progress_line(double elapsed_s, double interval_s, const Counters& now,
                          const Counters& before, const LatencyHistogram& interval,
                          uint32_t in_flight, bool verify, const VerifyCounts& v) {
  const double dt = interval_s > 1e-9 ? interval_s : 1e-9;
  auto rate = [dt](uint64_t a, uint64_t b) { return static_cast<double>(a - b) / dt; };
  std::string line =
      format("[%6.1fs] sent %.0f/s done %.0f/s p50 %" PRIu64 "us p99 %" PRIu64 "us p999 %" PRIu64
             "us in_flight %u",
             elapsed_s, rate(now.requests() + now.retries(), before.requests() + before.retries()),
             rate(now.replies(), before.replies()), interval.percentile(50),
             interval.percentile(99), interval.percentile(99.9), in_flight);
  // The usual suspects always, the rarer statuses when they occur.
  for (size_t i = 1; i < kStatusCount; ++i) {
    const Status s = status_at(i);
    const uint64_t n = now.status(s) - before.status(s);
    const bool always =
        s == Status::kNotFound || s == Status::kTimeout || s == Status::kUnavailable;
    if (always || n > 0) line += " " + std::string(client::to_string(s)) + "=" + u64(n);
  }
  line += " no_reply=" + u64(now.no_reply() - before.no_reply());
  auto extra = [&line](const char* name, uint64_t a, uint64_t b) {
    if (a != b) line += std::string(" ") + name + "=" + u64(a - b);
  };
  extra("late", now.late_replies, before.late_replies);
  extra("mismatched", now.mismatched_replies, before.mismatched_replies);
  extra("malformed", now.malformed_replies, before.malformed_replies);
  extra("amplified", now.amplified_replies, before.amplified_replies);
  extra("refused", now.refused, before.refused);
  extra("send_errors", now.send_errors, before.send_errors);
  if (verify) line += " verify_failed=" + u64(v.verify_failed);
  return line;
}

std::string csv_header() {
  std::string h = "elapsed_s,sent_per_s,done_per_s,p50_us,p99_us,p999_us,in_flight";
  for (size_t i = 1; i < kStatusCount; ++i) h += "," + std::string(client::to_string(status_at(i)));
  return h + ",no_reply,verify_failed";
}

std::string csv_row(double elapsed_s, double interval_s, const Counters& now,
                    const Counters& before, const LatencyHistogram& interval, uint32_t in_flight,
                    const VerifyCounts& v) {
  const double dt = interval_s > 1e-9 ? interval_s : 1e-9;
  auto rate = [dt](uint64_t a, uint64_t b) { return static_cast<double>(a - b) / dt; };
  std::string row =
      format("%.3f,%.1f,%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u", elapsed_s,
             rate(now.requests() + now.retries(), before.requests() + before.retries()),
             rate(now.replies(), before.replies()), interval.percentile(50),
             interval.percentile(99), interval.percentile(99.9), in_flight);
  for (size_t i = 1; i < kStatusCount; ++i) {
    row += "," + u64(now.status(status_at(i)) - before.status(status_at(i)));
  }
  return row + "," + u64(now.no_reply() - before.no_reply()) + "," + u64(v.verify_failed);
}

Reporter::Reporter(bool verify, std::FILE* out, std::FILE* csv)
    : verify_(verify), out_(out), csv_(csv) {
  if (csv_ != nullptr) {
    std::fprintf(csv_, "%s\n", csv_header().c_str());
    std::fflush(csv_);
  }
}

void Reporter::progress(double elapsed_s, const Counters& c, const VerifyCounts& v, Latencies& lat,
                        uint32_t in_flight) {
  const std::string line = progress_line(elapsed_s, elapsed_s - last_elapsed_, c, last_,
                                         lat.interval, in_flight, verify_, v);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  if (csv_ != nullptr) {
    const std::string row =
        csv_row(elapsed_s, elapsed_s - last_elapsed_, c, last_, lat.interval, in_flight, v);
    std::fprintf(csv_, "%s\n", row.c_str());
    std::fflush(csv_);
  }
  lat.fold_interval();
  last_ = c;
  last_elapsed_ = elapsed_s;
}

std::string summary_text(const RunSummary& s) {
  const SimConfig& cfg = s.config;
  const Counters& c = s.counters;
  std::string out;
  const std::string mode = cfg.open_loop() ? format("open loop (rate %.0f/s)", cfg.rate)
                                           : format("closed loop (window %u)", cfg.window);
  out += "udp_sim summary: " + u64(cfg.users) + " users (ids " + u64(cfg.first_user) + ".." +
         u64(cfg.first_user + cfg.users - 1) + ") against " + s.target + ", " + mode + ", " +
         u64(cfg.sockets) + " sockets, seed " + u64(cfg.seed) + (cfg.echo ? ", echo target" : "") +
         (cfg.lookup_only ? ", lookups only"
          : cfg.storm     ? ", login storm"
                          : "") +
         "\n";
  if (cfg.warmup_s > 0) {
    out += format("  figures leave out a %.1f s warm-up before the measured %.1f s\n", cfg.warmup_s,
                  cfg.duration_s);
  }
  out += format("  elapsed %.2f s%s; requests %" PRIu64 ", replies %" PRIu64
                " (%.0f/s), retries %" PRIu64 ", no_reply %" PRIu64 ", abandoned %" PRIu64,
                s.elapsed_s, s.interrupted ? " (interrupted)" : "", c.requests(), c.replies(),
                s.elapsed_s > 0 ? static_cast<double>(c.replies()) / s.elapsed_s : 0.0, c.retries(),
                c.no_reply(), c.abandoned());
  if (c.unsent > 0) out += ", unsent " + u64(c.unsent) + " (fell behind the rate)";
  out += "\n";
  if (!cfg.history.empty()) {
    out += "  history: " + u64(s.history_records) + " requests (warm-up included) in " +
           cfg.history + ", client " + u64(cfg.history_client) + "\n";
  }
  out += format("  %-10s %10s %8s %10s %8s %9s %8s %8s %8s  %s\n", "op", "requests", "retries",
                "replies", "no_reply", "abandoned", "p50_us", "p99_us", "p999_us", "statuses");
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpCounters& o = c.ops[i];
    const LatencyHistogram& h = s.latencies.per_op[i];
    out += format("  %-10s %10" PRIu64 " %8" PRIu64 " %10" PRIu64 " %8" PRIu64 " %9" PRIu64
                  " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 "  ",
                  client::to_string(kOps[i]), o.requests, o.retries, o.replies(), o.no_reply,
                  o.abandoned, h.percentile(50), h.percentile(99), h.percentile(99.9));
    out += nonzero_statuses(o.status) + "\n";
  }
  out += "  status:";
  for (size_t i = 0; i < kStatusCount; ++i) {
    out += " " + std::string(client::to_string(status_at(i))) + "=" + u64(c.status(status_at(i)));
  }
  out += "\n";
  const LatencyHistogram& t = s.latencies.total;
  out += format("  latency_us: min %" PRIu64 " p50 %" PRIu64 " p90 %" PRIu64 " p99 %" PRIu64
                " p999 %" PRIu64 " max %" PRIu64 " mean %.1f\n",
                t.min(), t.percentile(50), t.percentile(90), t.percentile(99), t.percentile(99.9),
                t.max(), t.mean());
  out += format("  unmatched replies: late %" PRIu64 ", mismatched %" PRIu64 ", malformed %" PRIu64
                ", amplified %" PRIu64 "; refused %" PRIu64 ", send_errors %" PRIu64
                ", recv_errors %" PRIu64 "\n",
                c.late_replies, c.mismatched_replies, c.malformed_replies, c.amplified_replies,
                c.refused, c.send_errors, c.recv_errors);
  const char* result = verify_result(cfg.verify, c, s.verify);
  if (cfg.verify) {
    out += format("  verify: %s (verified_ok %" PRIu64 ", verify_failed %" PRIu64
                  ", unjudged %" PRIu64 ", echo_checked %" PRIu64 ")\n",
                  result, s.verify.verified_ok, s.verify.verify_failed, s.verify.unjudged,
                  s.verify.echo_checked);
    for (const VerifyFailure& f : s.failures) out += "    failure: " + f.describe() + "\n";
    if (protocol_violations(c)) out += "    failure: the server sent protocol-violating replies\n";
  } else {
    out += "  verify: off\n";
  }
  return out;
}

boost::json::object summary_json(const RunSummary& s) {
  const SimConfig& cfg = s.config;
  const Counters& c = s.counters;
  boost::json::object o;
  o["target"] = s.target;
  o["users"] = cfg.users;
  o["first_user"] = cfg.first_user;
  o["sockets"] = cfg.sockets;
  o["mode"] = cfg.open_loop() ? "open" : "closed";
  o["window"] = cfg.open_loop() ? 0 : cfg.window;
  o["rate"] = cfg.rate;
  o["mix"] = to_string(cfg.mix);
  o["seed"] = cfg.seed;
  o["timeout_ms"] = cfg.timeout_ms;
  o["retries"] = cfg.retries;
  o["observed"] = cfg.observed;
  o["echo"] = cfg.echo;
  o["storm"] = cfg.storm;
  o["lookup_only"] = cfg.lookup_only;
  o["history"] = cfg.history;
  o["history_client"] = cfg.history_client;
  o["history_records"] = s.history_records;
  o["warmup_s"] = cfg.warmup_s;
  o["duration_s"] = cfg.duration_s;
  o["elapsed_s"] = s.elapsed_s;
  o["interrupted"] = s.interrupted;
  o["requests"] = c.requests();
  o["retries_sent"] = c.retries();
  o["replies"] = c.replies();
  o["no_reply"] = c.no_reply();
  o["abandoned"] = c.abandoned();
  o["unsent"] = c.unsent;
  o["requests_per_s"] = s.elapsed_s > 0 ? static_cast<double>(c.replies()) / s.elapsed_s : 0.0;
  std::array<uint64_t, kStatusCount> totals{};
  for (size_t i = 0; i < kStatusCount; ++i) totals[i] = c.status(status_at(i));
  o["status"] = status_json(totals);
  boost::json::object ops;
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpCounters& oc = c.ops[i];
    ops[client::to_string(kOps[i])] = {{"requests", oc.requests},
                                       {"retries", oc.retries},
                                       {"replies", oc.replies()},
                                       {"no_reply", oc.no_reply},
                                       {"abandoned", oc.abandoned},
                                       {"status", status_json(oc.status)},
                                       {"latency_us", latency_json(s.latencies.per_op[i])}};
  }
  o["ops"] = std::move(ops);
  o["latency_us"] = latency_json(s.latencies.total);
  o["late_replies"] = c.late_replies;
  o["mismatched_replies"] = c.mismatched_replies;
  o["malformed_replies"] = c.malformed_replies;
  o["amplified_replies"] = c.amplified_replies;
  o["refused"] = c.refused;
  o["send_errors"] = c.send_errors;
  o["recv_errors"] = c.recv_errors;
  boost::json::array failures;
  for (const VerifyFailure& f : s.failures) {
    failures.push_back({{"user", f.user_id},
                        {"op", client::to_string(f.op)},
                        {"expected", f.expected_text()},
                        {"got", f.got_text()}});
  }
  o["verify"] = {{"enabled", cfg.verify},
                 {"result", verify_result(cfg.verify, c, s.verify)},
                 {"verified_ok", s.verify.verified_ok},
                 {"verify_failed", s.verify.verify_failed},
                 {"unjudged", s.verify.unjudged},
                 {"echo_checked", s.verify.echo_checked},
                 {"failures", std::move(failures)}};
  o["exit_code"] = exit_code_for(cfg.verify, c, s.verify);
  return o;
}

}  // namespace imhash::sim
