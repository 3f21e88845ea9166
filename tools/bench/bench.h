// The benchmark driver's frame: what a scenario is given (the builds to run, its settings, a work
// directory, the result it fills) and the list of scenarios. A scenario is one function in a file
// of its own (tools/bench/scenario_NAME.cpp) that starts what it measures through the harness,
// measures, and puts every figure into its Result; main.cpp writes the Result as one JSON file
// (under docs/results/ by default) with the commit, the host, the settings and the hiccups.
// Tests never assert times: figures live here. Single-threaded: the driver's main thread only.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/binaries.h"

namespace imhash::bench {

// The settings a run was given (`--set KEY=VALUE`), read by the scenario with a default and a
// line of help each; every setting read, given or defaulted, is recorded in the result, and one
// given but never read fails the run (a typo must not silently measure the default).
class Settings {
 public:
  explicit Settings(std::map<std::string, std::string> given) : given_(std::move(given)) {}
  int64_t integer(const std::string& key, int64_t fallback, std::string_view help);
  double real(const std::string& key, double fallback, std::string_view help);
  std::string text(const std::string& key, const std::string& fallback, std::string_view help);
  // A list setting ("1,3" or "1 3"): its words, in order (recorded as the text given).
  std::vector<std::string> words(const std::string& key, const std::string& fallback,
                                 std::string_view help);
  // The same, each word an integer (throws std::invalid_argument naming the key otherwise).
  std::vector<int64_t> integers(const std::string& key, const std::string& fallback,
                                std::string_view help);
  // What was read, with its value, for the result; and the keys given but never read.
  const boost::json::object& used() const { return used_; }
  std::vector<std::string> unread() const;
  // With --help SCENARIO: only collect the help lines (the scenario is not run). A scenario
  // therefore reads every setting first and returns when `describing` is set, before it starts
  // anything.
  bool describing = false;
  const std::vector<std::string>& help_lines() const { return help_; }

 private:
  const std::string* find(const std::string& key);
  std::map<std::string, std::string> given_;
  std::map<std::string, bool> read_;
  boost::json::object used_;
  std::vector<std::string> help_;
};

// One run's result: the figures a scenario measured, as JSON, and the lines it prints as it goes
// (the human-readable report). main.cpp adds commit, host, settings and hiccups around it.
class Result {
 public:
  // The scenario's figures: nested objects and arrays as the scenario likes (each documented in
  // the scenario's file); numbers in SI-ish units named in the key (`_per_s`, `_us`, `_bytes`).
  boost::json::object figures;
  // Prints `line` on stdout and keeps it in the result's "report" array.
  void say(const std::string& line);
  const boost::json::array& report() const { return report_; }

 private:
  boost::json::array report_;
};

// printf into a std::string, for Result::say lines.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// What a scenario is given.
struct Context {
  test::Binaries self;                 // the build under test
  std::optional<test::Binaries> base;  // --base DIR: the build to compare it with, if given
  std::string self_dir, base_dir;      // their build directories (for the result)
  std::string source_dir;              // the repository (for ../shared/bench and scripts/)
  std::string work_dir;                // a fresh directory for this run: children's logs, files
  int rounds = 4;                      // --rounds: alternated rounds of an A/B (or repeats)
  Settings& settings;
  Result& result;
};

// Runs a scenario's step in a subdirectory of the work directory (made if need be): the harness
// writes its children's logs and state into the current directory, so each cluster of a run keeps
// its own (e2e's "hash1-base-round2"). Restores the previous directory when it goes.
class InDirectory {
 public:
  explicit InDirectory(const std::string& path);
  ~InDirectory();
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;

 private:
  std::string previous_;
};

struct Scenario {
  std::string_view name;
  std::string_view summary;  // one line, for `--help`
  void (*run)(Context&);
};

// Every scenario linked into the driver, by name. Each scenario file registers itself with
// IMHASH_BENCH_SCENARIO at static initialisation (the files are compiled into the executable, not
// a static library, so none is dropped by the linker).
const std::map<std::string_view, Scenario>& scenarios();
bool register_scenario(Scenario scenario);

#define IMHASH_BENCH_SCENARIO(NAME, SUMMARY, FUNCTION)                    \
  static const bool imhash_bench_registered_##FUNCTION [[maybe_unused]] = \
      ::imhash::bench::register_scenario({NAME, SUMMARY, &FUNCTION})

}  // namespace imhash::bench
