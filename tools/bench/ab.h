// The A/B of two builds in one run: a scenario's round (start what it measures with one build's
// programs, measure, stop) run alternately for the base build and this one, `rounds` times each
// (base, self, base, self...), so that both sides see the same drift of a shared machine. Per
// side: each figure's mean, min, max and A/A spread (the spread between rounds of the SAME
// build); and self/base of the means, with whether the change is beyond that spread: a reader can
// tell a regression from noise. Without --base the same rounds run for this build alone (repeats,
// with their spread). Main thread only.
#pragma once

#include <boost/json.hpp>
#include <functional>
#include <map>
#include <string>

#include "tools/bench/bench.h"

namespace imhash::bench {

// One round's figures by name, units in the names ("requests_per_s", "p99_us").
using RoundFigures = std::map<std::string, double>;

// The build a round runs: "base" or "self", and its programs.
struct Side {
  std::string name;
  const test::Binaries& binaries;
};

using RoundFunction = std::function<RoundFigures(const Side& side, int round)>;

// Runs the rounds (each in its own subdirectory of the work directory, LABEL-SIDE-roundN, where
// the harness keeps that round's logs) and returns
//   {rounds: [{round, side, FIGURE: value...}],
//    sides: {base: {FIGURE: {mean, min, max, aa_spread_pct}}, self: {...}},
//    ratio_self_over_base: {FIGURE: ratio}, change_pct: {FIGURE: %},
//    aa_spread_pct: {FIGURE: the larger side's}, beyond_noise: {FIGURE: bool}}
// (the last four only with a base). Prints a line per round and per figure.
boost::json::object alternate(Context& ctx, const std::string& label, const RoundFunction& round);

}  // namespace imhash::bench
