// What a result says about where and from what it was measured: the host (cores, memory, kernel,
// CPU model, load average, KVM halt polling), a tree's commit (and whether it is dirty), a build
// directory's source tree, and the host's hiccups (tools/hiccup_meter, run before the scenario:
// no request crossing these cores can be faster than their hiccups). Main thread only.
#pragma once

#include <boost/json.hpp>
#include <string>

namespace imhash::bench {

// {cores, memory_bytes, kernel, cpu_model, load_average: [1, 5, 15 min], guest_halt_poll_ns if
// this is a KVM guest with cpuidle-haltpoll}.
boost::json::object host_info();
// /proc/loadavg's three averages, as an array.
boost::json::array load_average();

// {commit, dirty} of the git tree at `dir` ({"commit": "unknown"} if it is none).
boost::json::object git_commit(const std::string& dir);
// The source directory a CMake build directory was configured from ("" if not found).
std::string source_of_build(const std::string& build_dir);

// tools/hiccup_meter --duration SECONDS: {seconds, threads: [{thread, hiccups, over_1ms, lost_ms,
// lost_percent, longest_ms}], longest_ms, lost_ms} (the worst thread's longest and the sum lost).
boost::json::object hiccups(const std::string& hiccup_meter, double seconds);

}  // namespace imhash::bench
