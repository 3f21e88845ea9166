// check_history: judges the histories that clients recorded (udp_sim --history) against the rules
// of tools/nemesis/history_checker.h and prints the report. Thin glue: the options, the files, the
// exit status; the parsing and the rules are imhash_history's.
//
// Exit status: 0 passed, 1 anomalies that fail the run, 2 bad input (a usage error, or a file that
// cannot be read or is malformed: one line on stderr naming the file and line).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "tools/nemesis/history_checker.h"

namespace po = boost::program_options;
using namespace imhash::history;

namespace {

constexpr int kExitPassed = 0;
constexpr int kExitAnomalies = 1;
constexpr int kExitBadInput = 2;

constexpr const char* kAbout = R"(check_history - judges recorded client histories, per user

Usage: check_history [--windows FILE] [--json] [--examples N] HISTORY...

Each HISTORY file is one client's record (first line '# imhash-history 1', then one line a
request: invoke_ns complete_ns op user_id status endpoint); several files are merged by user.
Per user the record is a register: LOGIN and HEARTBEAT write their endpoint, LOGOUT writes
"absent". A write answered OK is acknowledged; BAD_REQUEST, UNAUTHORIZED, RATE_LIMITED and
UNSUPPORTED_VERSION were not applied; any other answer, or none, is indeterminate (it may take
effect at any time after it was sent, or never). Each LOOKUP answered OK or NOT_FOUND is judged:
  phantom        OK with an endpoint no write of the user (sent before the reply) carries
  stale          OK with an endpoint an acknowledged write had overwritten before the lookup began
  logout_undone  the same, and an acknowledged LOGOUT is among the overwriters
  write_lost     NOT_FOUND after an acknowledged LOGIN or HEARTBEAT that no LOGOUT (acknowledged
                 or indeterminate) may have removed
  unavailable    any request answered UNAVAILABLE or TIMEOUT
  no_reply       any request without a reply (reported; does not fail the run by itself)
An anomaly during a window (--windows: lines 'start_ns end_ns kind rules', rules comma-separated
or *) that excuses its rule is counted inside it, by kind. The run passes with no anomaly but
no_reply outside every window. Exit status: 0 passed, 1 anomalies, 2 bad input.
)";

int run(int argc, char** argv) {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help and exit")(
      "windows", po::value<std::string>(), "the fault windows (the nemesis writes them)")(
      "json", po::bool_switch(), "print the report as one JSON object")(
      "examples", po::value<size_t>()->default_value(10),
      "examples per rule, outside windows and again inside");
  po::options_description hidden;
  hidden.add_options()("history", po::value<std::vector<std::string>>(), "");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("history", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "check_history: %s\nTry 'check_history --help'.\n", e.what());
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << kAbout << '\n' << options << std::endl;
    return kExitPassed;
  }
  if (!vm.count("history")) {
    std::fprintf(stderr, "check_history: no HISTORY file given\nTry 'check_history --help'.\n");
    return kExitBadInput;
  }

  History history;
  std::vector<Window> windows;
  std::optional<InputError> error;
  for (const std::string& path : vm["history"].as<std::vector<std::string>>()) {
    if ((error = read_history_file(path, history))) break;
  }
  if (!error && vm.count("windows"))
    error = read_windows_file(vm["windows"].as<std::string>(), windows);
  if (error) {
    std::fprintf(stderr, "check_history: %s\n", error->to_string().c_str());
    return kExitBadInput;
  }
  const Report report =
      check(std::move(history), windows, CheckOptions{.examples = vm["examples"].as<size_t>()});
  std::cout << (vm["json"].as<bool>() ? render_json(report) + "\n" : render_text(report));
  std::cout.flush();
  return report.passed() ? kExitPassed : kExitAnomalies;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // out of memory on a huge history, say
    std::fprintf(stderr, "check_history: %s\n", e.what());
    return kExitBadInput;
  }
}
