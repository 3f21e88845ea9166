#include "tools/bench/host.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tools/bench/programs.h"

namespace imhash::bench {

namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The value of the first "KEY<sep>value" line of a /proc file whose key starts with `key`.
std::string proc_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

}  // namespace

boost::json::array load_average() {
  std::istringstream in(first_line("/proc/loadavg"));
  boost::json::array out;
  double v = 0;
  for (int i = 0; i < 3 && (in >> v); ++i) out.emplace_back(v);
  return out;
}

boost::json::object host_info() {
  boost::json::object o;
  o["cores"] = static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN));
  const std::string mem = proc_field("/proc/meminfo", "MemTotal");  // "16318772 kB"
  o["memory_bytes"] = mem.empty() ? 0 : std::stoull(mem) * 1024;
  utsname u{};
  if (uname(&u) == 0) o["kernel"] = std::string(u.release) + " " + u.version;
  o["cpu_model"] = proc_field("/proc/cpuinfo", "model name");
  o["load_average"] = load_average();
  // KVM guests: with guest_halt_poll_ns at 0 every wake-up of an idle vCPU is a round trip
  // through the host, which dominates latency at moderate load (scripts/bench.sh's note).
  const std::string poll = first_line("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
  if (!poll.empty()) o["guest_halt_poll_ns"] = std::stoll(poll);
  return o;
}

boost::json::object git_commit(const std::string& dir) {
  boost::json::object o;
  try {
    const Output head = run_program(which("git"), {"-C", dir, "rev-parse", "HEAD"},
                                    std::chrono::seconds(30), "/dev/null");
    if (head.exit_code != 0) return {{"commit", "unknown"}};
    o["commit"] = head.out.substr(0, head.out.find('\n'));
    // Tracked files changed (untracked ones, such as build trees and results, do not count).
    const Output status =
        run_program(which("git"), {"-C", dir, "status", "--porcelain", "--untracked-files=no"},
                    std::chrono::seconds(60), "/dev/null");
    o["dirty"] = !status.out.empty();
  } catch (const std::exception&) {
    return {{"commit", "unknown"}};
  }
  return o;
}

std::string source_of_build(const std::string& build_dir) {
  std::ifstream in(build_dir + "/CMakeCache.txt");
  for (std::string line; std::getline(in, line);) {
    const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

boost::json::object hiccups(const std::string& hiccup_meter, double seconds) {
  char duration[32];
  std::snprintf(duration, sizeof duration, "%g", seconds);
  const std::string out =
      run_ok(hiccup_meter, {"--duration", duration},
             std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + 30000));
  boost::json::object o;
  o["seconds"] = seconds;
  boost::json::array threads;
  double longest = 0, lost = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    // "thread 0: hiccups over 100 us: 12 (over 1 ms: 1), lost 3.2 ms of 5000 (0.06%), longest
    // 1.20 ms" (tools/hiccup_meter.cpp)
    unsigned thread = 0, threshold = 0;
    unsigned long count = 0, over_1ms = 0;
    double lost_ms = 0, of_ms = 0, percent = 0, longest_ms = 0;
    if (std::sscanf(line.c_str(),
                    "thread %u: hiccups over %u us: %lu (over 1 ms: %lu), lost %lf ms of %lf "
                    "(%lf%%), longest %lf ms",
                    &thread, &threshold, &count, &over_1ms, &lost_ms, &of_ms, &percent,
                    &longest_ms) != 8) {
      continue;
    }
    threads.push_back({{"thread", thread},
                       {"threshold_us", threshold},
                       {"hiccups", count},
                       {"over_1ms", over_1ms},
                       {"lost_ms", lost_ms},
                       {"lost_percent", percent},
                       {"longest_ms", longest_ms}});
    longest = std::max(longest, longest_ms);
    lost += lost_ms;
  }
  o["threads"] = std::move(threads);
  o["longest_ms"] = longest;
  o["lost_ms"] = lost;
  return o;
}

}  // namespace imhash::bench
