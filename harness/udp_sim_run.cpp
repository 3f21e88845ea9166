#include "harness/udp_sim_run.h"

#include <signal.h>

#include <algorithm>
#include <stdexcept>

#include "harness/run_logs.h"

namespace imhash::test {

namespace json = boost::json;

namespace {

const json::value& at(const json::object& o, std::string_view key, std::string_view where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) {
    throw std::runtime_error("udp_sim summary: no \"" + std::string(key) + "\" in " +
                             std::string(where));
  }
  return *v;
}

const json::object& object(const json::object& o, std::string_view key, std::string_view where) {
  const json::value& v = at(o, key, where);
  if (!v.is_object())
    throw std::runtime_error("udp_sim summary: \"" + std::string(key) + "\" is not an object");
  return v.as_object();
}

uint64_t u64(const json::object& o, std::string_view key, std::string_view where) {
  return at(o, key, where).to_number<uint64_t>();
}

double real(const json::object& o, std::string_view key, std::string_view where) {
  return at(o, key, where).to_number<double>();
}

std::map<std::string, uint64_t> statuses(const json::object& o) {
  std::map<std::string, uint64_t> out;
  for (const auto& entry : o) out[std::string(entry.key())] = entry.value().to_number<uint64_t>();
  return out;
}

UdpSimLatency latency(const json::object& o) {
  const std::string_view w = "latency_us";
  return UdpSimLatency{.count = u64(o, "count", w),
                       .min = u64(o, "min", w),
                       .p50 = u64(o, "p50", w),
                       .p90 = u64(o, "p90", w),
                       .p99 = u64(o, "p99", w),
                       .p999 = u64(o, "p999", w),
                       .max = u64(o, "max", w),
                       .mean = real(o, "mean", w)};
}

uint64_t count_of(const std::map<std::string, uint64_t>& status, std::string_view name) {
  const auto it = status.find(std::string(name));
  if (it == status.end()) {
    throw std::runtime_error("udp_sim summary: no status \"" + std::string(name) + "\"");
  }
  return it->second;
}

std::string tail_of_text(const std::string& text, size_t max_chars) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

}  // namespace

uint64_t UdpSimOp::count(std::string_view status_name) const {
  return count_of(status, status_name);
}

uint64_t UdpSimSummary::count(std::string_view status_name) const {
  return count_of(status, status_name);
}

const UdpSimOp& UdpSimSummary::op(std::string_view name) const {
  const auto it = ops.find(std::string(name));
  if (it == ops.end())
    throw std::runtime_error("udp_sim summary: no op \"" + std::string(name) + "\"");
  return it->second;
}

UdpSimSummary UdpSimSummary::parse(std::string_view json_text) {
  boost::system::error_code ec;
  json::value v = json::parse(json_text, ec);
  if (ec || !v.is_object()) {
    throw std::runtime_error("udp_sim summary is not a JSON object (" + ec.message() +
                             "): " + tail_of_text(std::string(json_text), 2000));
  }
  UdpSimSummary s;
  s.json = std::move(v.as_object());
  const json::object& o = s.json;
  const std::string_view w = "the summary";
  s.requests = u64(o, "requests", w);
  s.retries_sent = u64(o, "retries_sent", w);
  s.replies = u64(o, "replies", w);
  s.no_reply = u64(o, "no_reply", w);
  s.abandoned = u64(o, "abandoned", w);
  s.unsent = u64(o, "unsent", w);
  s.requests_per_s = real(o, "requests_per_s", w);
  s.elapsed_s = real(o, "elapsed_s", w);
  s.interrupted = at(o, "interrupted", w).as_bool();
  s.status = statuses(object(o, "status", w));
  for (const auto& entry : object(o, "ops", w)) {
    const std::string name(entry.key());
    const json::object& op = entry.value().as_object();
    s.ops[name] = UdpSimOp{.requests = u64(op, "requests", name),
                           .retries = u64(op, "retries", name),
                           .replies = u64(op, "replies", name),
                           .no_reply = u64(op, "no_reply", name),
                           .abandoned = u64(op, "abandoned", name),
                           .status = statuses(object(op, "status", name)),
                           .latency_us = latency(object(op, "latency_us", name))};
  }
  s.latency_us = latency(object(o, "latency_us", w));
  s.late_replies = u64(o, "late_replies", w);
  s.mismatched_replies = u64(o, "mismatched_replies", w);
  s.malformed_replies = u64(o, "malformed_replies", w);
  s.amplified_replies = u64(o, "amplified_replies", w);
  s.refused = u64(o, "refused", w);
  s.send_errors = u64(o, "send_errors", w);
  s.recv_errors = u64(o, "recv_errors", w);
  const json::object& verify = object(o, "verify", w);
  s.verify = UdpSimVerify{.enabled = at(verify, "enabled", "verify").as_bool(),
                          .result = std::string(at(verify, "result", "verify").as_string()),
                          .verified_ok = u64(verify, "verified_ok", "verify"),
                          .verify_failed = u64(verify, "verify_failed", "verify"),
                          .unjudged = u64(verify, "unjudged", "verify"),
                          .echo_checked = u64(verify, "echo_checked", "verify"),
                          .failures = at(verify, "failures", "verify").as_array()};
  s.exit_code = at(o, "exit_code", w).to_number<int>();
  return s;
}

UdpSimSummary read_udp_sim_summary(ChildProcess& sim, std::chrono::milliseconds timeout) {
  std::string out;
  const auto failed = [&](const std::string& what) {
    return std::runtime_error(
        "udp_sim (pid " + std::to_string(sim.pid()) + ") " + what + "; its stdout: " +
        (out.empty() ? "(nothing)" : tail_of_text(out, 2000)) + "\nthe end of its stderr (" +
        sim.log_path() + "):\n" + tail_of_file(sim.log_path(), kTailLines));
  };
  try {
    out = sim.read_all(timeout);
  } catch (const std::exception& e) {
    out = sim.available_output();
    throw failed(std::string("printed no summary: ") + e.what());
  }
  // The summary is the one line that is a JSON object (udp_sim --json prints nothing else on
  // stdout); the last one, should anything precede it.
  size_t begin = std::string::npos;
  for (size_t at = 0; at < out.size();) {
    const size_t end = std::min(out.find('\n', at), out.size());
    if (end > at && out[at] == '{') begin = at;
    at = end + 1;
  }
  if (begin == std::string::npos) throw failed("printed no summary");
  const size_t end = std::min(out.find('\n', begin), out.size());
  try {
    return UdpSimSummary::parse(std::string_view(out).substr(begin, end - begin));
  } catch (const std::exception& e) {
    throw failed(e.what());
  }
}

UdpSim::UdpSim(std::vector<std::string> args, UdpSimOptions options) {
  if (std::find(args.begin(), args.end(), "--json") == args.end()) args.push_back("--json");
  process_ = std::make_unique<ChildProcess>(
      options.udp_sim, std::move(args),
      ChildOptions{.env = std::move(options.env), .name = options.name, .netns = options.netns});
}

UdpSimSummary UdpSim::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  UdpSimSummary s = read_udp_sim_summary(*process_, timeout);
  // Its stdout is closed: it is exiting.
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 deadline - std::chrono::steady_clock::now()),
                             std::chrono::milliseconds(1000));
  exit_code_ = process_->stop(0, left);
  return s;
}

void UdpSim::interrupt() {
  if (process_->running()) kill(process_->pid(), SIGINT);
}

}  // namespace imhash::test
