// A doctest listener for the integration tests: each TEST_CASE begins a run of its own
// (harness/run_logs.h) in WORKDIR/TEST_NAME.PID, so the children of every test log into a
// directory of their own even when ctest runs tests side by side, and a test case that fails (an
// assertion, an exception, a crash) prints the last lines of each log its children wrote, named,
// so that the CI log alone tells what the servers saw. The logs stay on disk afterwards.
// doctest calls it from the thread that runs the tests.
#include <doctest/doctest.h>

#include <ostream>
#include <string>

#include "harness/run_logs.h"

namespace {

constexpr size_t kTailLines = 40;

class RunLogsListener : public doctest::IReporter {
 public:
  explicit RunLogsListener(const doctest::ContextOptions& options) : out_(*options.cout) {}

  void test_case_start(const doctest::TestCaseData& test) override {
    imhash::test::RunLogs::begin_test(".", test.m_name);
  }
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    if (stats.testCaseSuccess) return;
    const auto files = imhash::test::RunLogs::files();
    out_ << "\n==== " << files.size() << " log file(s) of this test's children, in "
         << imhash::test::RunLogs::dir() << " ====\n"
         << imhash::test::RunLogs::tails(kTailLines) << "==== end of the logs ====\n\n";
    out_.flush();
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  std::ostream& out_;
};

}  // namespace

REGISTER_LISTENER("run_logs", 1, RunLogsListener);
