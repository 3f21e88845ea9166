#include "tools/bench/sim.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace imhash::bench {

namespace {

// The number after `flag` in `args` (0 if absent): udp_sim's own bound on its run.
double seconds_after(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? 0 : std::stod(*(it + 1));
}

}  // namespace

uint64_t errors_of(const UdpSimSummary& s) {
  const uint64_t fine = s.count("OK") + s.count("NOT_FOUND");
  return s.requests >= fine ? s.requests - fine : 0;
}

boost::json::object sim_figures(const UdpSimSummary& s) {
  return {{"requests_per_s", s.requests_per_s},
          {"requests", s.requests},
          {"errors", errors_of(s)},
          {"no_reply", s.no_reply},
          {"p50_us", s.latency_us.p50},
          {"p99_us", s.latency_us.p99},
          {"p999_us", s.latency_us.p999},
          {"max_us", s.latency_us.max},
          {"elapsed_s", s.elapsed_s}};
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

UdpSimSummary run_sim(const std::string& udp_sim, std::vector<std::string> args,
                      const std::string& name, std::chrono::milliseconds slack) {
  const double own = seconds_after(args, "--duration") + seconds_after(args, "--warmup");
  test::UdpSim run(std::move(args), {.udp_sim = udp_sim, .name = name});
  return run.wait(slack + std::chrono::milliseconds(static_cast<int64_t>(own * 1000)));
}

}  // namespace imhash::bench
