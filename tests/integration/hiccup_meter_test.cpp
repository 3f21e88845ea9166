// hiccup_meter: one report line per spinning thread, and clear exit codes for bad flags.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "harness/child_process.h"

using namespace std::chrono_literals;
using imhash::test::ChildProcess;

TEST_CASE("hiccup_meter: reports every thread, and bad flags exit 64") {
  ChildProcess meter(IMHASH_HICCUP_METER, {"--duration", "0.2", "--threads", "2"});
  const std::string out = meter.read_all(30s);
  CHECK(meter.stop(0) == 0);
  std::istringstream lines(out);
  std::string line;
  int reports = 0;
  while (std::getline(lines, line)) {
    CAPTURE(line);
    CHECK(line.rfind("thread " + std::to_string(reports) + ": hiccups over 100 us: ", 0) == 0);
    CHECK(line.find("longest") != std::string::npos);
    ++reports;
  }
  CHECK(reports == 2);

  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--threads", "0"}, {"--duration", "0"}, {"--threshold-us", "0"}, {"--bogus"}}) {
    CAPTURE(bad.front());
    ChildProcess p(IMHASH_HICCUP_METER, bad);
    CHECK(p.stop(0) == 64);
  }
}
