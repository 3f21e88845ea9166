// The process's own figures that every daemon's /metrics carries beside its imhash_* metrics
// (MetricsServer appends them to each scrape):
//   process_resident_memory_bytes  resident set size (/proc/self/statm), the Prometheus name
//   imhash_memory_limit_bytes      the memory the process may use: the smallest memory limit of
//                                  its cgroup and the cgroups above it (systemd's MemoryMax=;
//                                  cgroup v2 memory.max or v1 memory.limit_in_bytes), or the
//                                  host's memory (MemTotal) if that is smaller or there is none.
// Their ratio is what the "hash server near its memory limit" alert watches
// (deploy/prometheus/alerts.yml). Plain functions reading /proc and /sys; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/runtime/metrics.h"

namespace imhash {

std::optional<uint64_t> resident_memory_bytes();
std::optional<uint64_t> memory_limit_bytes();

// Adds both gauges (each only where it can be read).
void append_process_metrics(MetricsText& m);

}  // namespace imhash
