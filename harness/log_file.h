// Log files of our own for the children of one test (ChildOptions::stderr_log: a file holding
// nothing but that child's stderr, to read line by line), and a bounded wait for a line in one.
// Test thread.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

#include "harness/run_logs.h"
#include "harness/wait_until.h"

namespace imhash::test {

// RUN_DIR/WHAT.log in the current run's directory (harness/run_logs.h), recorded there, so that a
// failing test prints its tail too.
inline std::string log_path(const std::string& what) { return RunLogs::path(what); }

inline std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `s` without its trailing newlines and spaces (a command's output as one line of a log).
inline std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Waits (bounded) until the log at `path` holds `needle`.
inline bool log_says(const std::string& path, const std::string& needle) {
  return wait_until([&] { return file_text(path).find(needle) != std::string::npos; });
}

}  // namespace imhash::test
