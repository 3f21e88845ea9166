// RunLogs: where the children of the current run write their logs, and the list of the log files
// opened during it. A run is one test case (the test binary's main, tests/integration/
// run_logs_listener.cpp, begins one per TEST_CASE) or one benchmark run (the driver begins it in
// the run's work directory). Every ChildProcess, etcd member and udp_sim run logs into the run's
// directory under the name of the child (hash1.log, login1.log, cfg0.log, etcd.m0.log, ...), and
// when a test fails its runner prints tails(): the end of each, named, so that a failure can be
// diagnosed from the CI log alone. The files stay on disk for post-mortems.
//
// Before any begin() the run directory is the working directory. The harness knows no test
// framework: the test or the driver says when a run begins. All functions are thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace imhash::test {

// How many of a log's last lines a failure shows.
inline constexpr size_t kTailLines = 40;
// Earlier runs' directories of a test that begin_test keeps besides the new one.
inline constexpr size_t kEarlierRunsKept = 2;

class RunLogs {
 public:
  // Makes `dir` (created with its parents; made absolute) the current run's directory and forgets
  // the files recorded for the previous run.
  static void begin(const std::string& dir);
  // begin(ROOT/NAME.PID) for a test called `test_name` (NAME: the name with what a file name should
  // not hold replaced by '_'), after removing ROOT/NAME.OTHERPID of earlier runs of the same test
  // whose process is gone, all but the newest kEarlierRunsKept: the work directory keeps the last
  // few runs of each test, not every one. Returns the directory.
  static std::string begin_test(const std::string& root, const std::string& test_name);
  // The current run's directory (absolute).
  static std::string dir();

  // The log file of the child called `name` in this run, DIR/NAME.log, recorded. The same name
  // gives the same file: a restarted server appends to its log (ChildProcess marks each start).
  static std::string path(const std::string& name);
  // `stem`, or stem-2, stem-3, ... whichever no path() of this run has used yet: for a second
  // cluster of the same kind in one run (a second EtcdCluster logs as etcd-2.m0, ...).
  static std::string fresh_name(const std::string& stem);
  // Records a log file named elsewhere (ChildOptions::stderr_log), so that tails() shows it too.
  static void record(const std::string& file);

  // Every file recorded in this run, in the order first recorded.
  static std::vector<std::string> files();
  // The last `lines` lines of each recorded file, each under a "---- FILE (last N of M lines)"
  // header: what a failed test prints.
  static std::string tails(size_t lines = kTailLines);
};

// The last `lines` lines of the file at `path` ("" if it cannot be read), and in `total` (if not
// null) how many lines it has.
std::string tail_of_file(const std::string& path, size_t lines, size_t* total = nullptr);

}  // namespace imhash::test
