// The takeover scenario's probes of the config servers' admin API (GET /v1/status, as bench.sh's
// takeover.py asked it): which one leads, when a leader shows every node up at its version, when
// a restarted config server stands by. Each polls every 50 ms (bench.sh's pace) with a bound and
// says when it saw the event on the steady clock, so that a time measured from a kill is off by
// the poll's period at most. Main thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// In a namespace of its own, as the scenario's other files: the driver is a unity build, and
// their helpers must not meet another scenario's of the same name in one translation unit.
namespace imhash::bench::takeover {

// What a probe saw, and when.
template <typename T>
struct Seen {
  T value{};
  std::chrono::steady_clock::time_point at{};
};

// The index in `admins` of the first config server answering 200 as the leader (with `settled`:
// and no longer refusing changes, no control_plane.settling_ms), leaving out index `skip` (-1:
// none); nullopt if none does within `bound`.
std::optional<Seen<int>> await_leader(const std::vector<std::string>& admins, int skip,
                                      bool settled, std::chrono::milliseconds bound);

// The table version once `admin` leads, says it converged and shows exactly `hashes` hash and
// `logins` login servers, every one up at that version; nullopt if not within `bound`.
std::optional<Seen<uint64_t>> await_nodes_back(const std::string& admin, int hashes, int logins,
                                               std::chrono::milliseconds bound);

// When `admin` lists config server `name` among its standbys; nullopt if not within `bound`.
std::optional<std::chrono::steady_clock::time_point> await_standby(const std::string& admin,
                                                                   const std::string& name,
                                                                   std::chrono::milliseconds bound);

}  // namespace imhash::bench::takeover
