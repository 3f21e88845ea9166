#include "common/runtime/process_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace imhash {

namespace {

// Every process's /metrics ends with these (common/codec/metric_def.h).
constexpr MetricDef kResidentMemoryBytes{"process_resident_memory_bytes", MetricDef::Type::kGauge,
                                         "resident memory size in bytes"};
constexpr MetricDef kMemoryLimitBytes{
    "imhash_memory_limit_bytes", MetricDef::Type::kGauge,
    "memory this process may use: its cgroup's limit (systemd MemoryMax=) or the host's memory, "
    "whichever is smaller"};

std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;  // missing, or "max" (cgroup v2: no limit)
}

// The smallest limit in `file` from the cgroup directory `dir` up to `root`.
std::optional<uint64_t> smallest_limit(const std::string& root, std::string dir,
                                       const std::string& file) {
  std::optional<uint64_t> best;
  for (;;) {
    if (const auto v = read_number(root + dir + "/" + file)) best = std::min(best.value_or(*v), *v);
    if (dir.empty() || dir == "/") break;
    dir = dir.substr(0, dir.rfind('/'));
  }
  return best;
}

}  // namespace

std::optional<uint64_t> resident_memory_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return std::nullopt;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::optional<uint64_t> memory_limit_bytes() {
  std::optional<uint64_t> limit;
  const auto take = [&](std::optional<uint64_t> v) {
    if (v && *v > 0) limit = std::min(limit.value_or(*v), *v);
  };
  // /proc/self/cgroup: "0::/system.slice/x.service" (v2), "4:memory:/path" (v1 memory controller).
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      take(smallest_limit("/sys/fs/cgroup", path, "memory.max"));
    } else if (controllers == "memory") {
      take(smallest_limit("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes"));
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemTotal:") take(kib * 1024);
  }
  return limit;
}

void append_process_metrics(MetricsText& m) {
  if (const auto rss = resident_memory_bytes()) {
    m.add(kResidentMemoryBytes, static_cast<double>(*rss));
  }
  if (const auto limit = memory_limit_bytes()) {
    m.add(kMemoryLimitBytes, static_cast<double>(*limit));
  }
}

}  // namespace imhash
