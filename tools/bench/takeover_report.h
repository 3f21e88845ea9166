// The takeover scenario's rounds and what it reports of them (bench.sh's takeover_round lines and
// takeover.py's report): each round's two lines and its figures, the rounds' summary (takeover
// times against the lease TTL, nodes back, the changes in flight), the history's versions, and
// the load's failed lookups and verify result. Keys documented in scenario_takeover.cpp. Main
// thread only.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench.h"
#include "tools/bench/sim.h"

namespace imhash::bench::takeover {

// One round: the leader killed in the middle of an imctl assign, as bench.sh's rounds.tsv row.
struct Round {
  int number = 0;
  bool term = false;    // SIGTERM, else kill -9
  int killed = 0;       // cfgN
  double delay_ms = 0;  // from imctl's start to the signal, as it happened
  std::string change;   // "assign LO-HI to hashN", as the history names it
  uint64_t before = 0;  // the table version before
  double takeover_ms = 0;
  int next = -1;  // the config server that led after it
  std::optional<double> nodes_ms;
  std::optional<uint64_t> acked;     // the version imctl was told, if it was
  std::vector<uint64_t> made;        // the versions in the history whose change is this one
  std::optional<double> standby_ms;  // from the restart of the killed one to its standing by
  std::string answer;                // what imctl said
};

// The round's two lines.
void say_round(Context& ctx, const Round& r);
// The round's figures (an element of "rounds").
boost::json::object round_figures(const Round& r);
// The rounds' summary into the figures, and its lines.
void report_rounds(Context& ctx, const std::vector<Round>& rows, int64_t ttl_s);
// Versions 1..latest, each once? (`history`: imctl --json history; `status`: imctl --json status.)
void report_versions(Context& ctx, const boost::json::value& history,
                     const boost::json::value& status);
// The load's summary ("load").
void report_load(Context& ctx, const UdpSimSummary& d);

}  // namespace imhash::bench::takeover
