#include "tools/bench/sim.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "harness/wait_until.h"

namespace imhash::bench {

namespace {

uint64_t count_of(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<uint64_t>() : 0;
}

// The number after `flag` in `args` (0 if absent): udp_sim's own bound on its run.
double seconds_after(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? 0 : std::stod(*(it + 1));
}

}  // namespace

SimSummary parse_sim_summary(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) {
    throw std::runtime_error("udp_sim gave no JSON summary: " + std::string(text.substr(0, 300)));
  }
  SimSummary s;
  s.json = std::move(v.as_object());
  const auto& o = s.json;
  s.requests_per_s = o.at("requests_per_s").to_number<double>();
  s.elapsed_s = o.at("elapsed_s").to_number<double>();
  s.requests = count_of(o, "requests");
  s.replies = count_of(o, "replies");
  s.no_reply = count_of(o, "no_reply");
  s.abandoned = count_of(o, "abandoned");
  const auto& status = o.at("status").as_object();
  s.ok = count_of(status, "OK");
  s.not_found = count_of(status, "NOT_FOUND");
  s.errors = s.requests >= s.ok + s.not_found ? s.requests - s.ok - s.not_found : 0;
  const auto& lat = o.at("latency_us").as_object();
  s.p50_us = count_of(lat, "p50");
  s.p99_us = count_of(lat, "p99");
  s.p999_us = count_of(lat, "p999");
  s.max_us = count_of(lat, "max");
  return s;
}

boost::json::object SimSummary::figures() const {
  return {{"requests_per_s", requests_per_s},
          {"requests", requests},
          {"errors", errors},
          {"no_reply", no_reply},
          {"p50_us", p50_us},
          {"p99_us", p99_us},
          {"p999_us", p999_us},
          {"max_us", max_us},
          {"elapsed_s", elapsed_s}};
}

boost::json::object read_sim_csv(const std::string& path) {
  std::ifstream in(path);
  auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::string cell;
    for (char c : line) {
      if (c == ',') {
        out.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    out.push_back(cell);
    return out;
  };
  boost::json::array columns, rows;
  std::string line;
  if (std::getline(in, line)) {
    for (const std::string& c : cells(line)) columns.emplace_back(c);
  }
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    boost::json::array row;
    for (const std::string& c : cells(line)) {
      char* end = nullptr;
      const double v = std::strtod(c.c_str(), &end);
      if (!c.empty() && *end == '\0') {
        row.emplace_back(v);
      } else {
        row.emplace_back(c);
      }
    }
    rows.push_back(std::move(row));
  }
  return {{"columns", std::move(columns)}, {"rows", std::move(rows)}};
}

SimRun::SimRun(const std::string& udp_sim, std::vector<std::string> args,
               const std::string& progress_log)
    : progress_log_(progress_log) {
  args.push_back("--json");
  std::ofstream(progress_log_, std::ios::trunc);  // empty, so wait_progress counts this run only
  child_ = std::make_unique<test::ChildProcess>(udp_sim, std::move(args),
                                                test::ChildOptions{{}, progress_log_});
}

SimSummary SimRun::finish(std::chrono::milliseconds timeout) {
  std::string out;
  try {
    out = child_->read_all(timeout);
  } catch (const std::exception&) {
    child_->stop(SIGKILL);
    throw std::runtime_error("udp_sim did not end within its bound (" + progress_log_ + ")");
  }
  const int code = child_->stop(0);
  SimSummary s = parse_sim_summary(out);
  s.exit_code = code;
  return s;
}

void SimRun::wait_progress(int count, std::chrono::milliseconds timeout) {
  const bool seen = test::wait_until(
      [&] {
        std::ifstream in(progress_log_);
        int lines = 0;
        for (std::string line; std::getline(in, line);) lines += !line.empty() && line[0] == '[';
        return lines >= count || !child_->running();
      },
      timeout, std::chrono::milliseconds(50));
  if (!seen) throw std::runtime_error("udp_sim printed no progress (" + progress_log_ + ")");
}

SimSummary run_sim(const std::string& udp_sim, std::vector<std::string> args,
                   const std::string& progress_log, std::chrono::milliseconds slack) {
  const double own = seconds_after(args, "--duration") + seconds_after(args, "--warmup");
  SimRun run(udp_sim, std::move(args), progress_log);
  return run.finish(slack + std::chrono::milliseconds(static_cast<int64_t>(own * 1000)));
}

}  // namespace imhash::bench
