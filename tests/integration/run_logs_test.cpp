// The harness's per-test log directories (harness/run_logs.h): what a new run of a test leaves of
// the earlier ones.
#include "harness/run_logs.h"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>

using namespace imhash::test;
namespace fs = std::filesystem;

TEST_CASE("run logs: a test's work directory keeps its last runs, not only the latest") {
  // A failed nemesis run's files went with its directory when the next run of the test began.
  const std::string current = RunLogs::dir();
  const fs::path root = fs::path(current) / "root";
  fs::create_directories(root);
  // Earlier runs by processes that are gone (pids above any pid_max), oldest first.
  const auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 4; ++i) {
    const fs::path run = root / ("some_test." + std::to_string(99999990 + i));
    fs::create_directories(run);
    fs::last_write_time(run, now - std::chrono::minutes(10 - i));
  }
  fs::create_directories(root / "other_test.99999980");  // another test's: not touched
  const std::string dir = RunLogs::begin_test(root.string(), "some test");
  RunLogs::begin(current);  // this test case's own directory again

  CHECK(fs::path(dir).filename().string().rfind("some_test.", 0) == 0);
  CHECK(fs::exists(dir));
  CHECK_FALSE(fs::exists(root / "some_test.99999990"));
  CHECK_FALSE(fs::exists(root / "some_test.99999991"));
  CHECK(fs::exists(root / "some_test.99999992"));
  CHECK(fs::exists(root / "some_test.99999993"));
  CHECK(fs::exists(root / "other_test.99999980"));
  static_assert(kEarlierRunsKept == 2);
}
