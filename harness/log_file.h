// Log files of our own for the children of one test (ChildOptions::stderr_log; the default one is
// shared by every test of the directory), and a bounded wait for a line in one. Test thread.
#pragma once

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "harness/wait_until.h"

namespace imhash::test {

inline std::string log_path(const std::string& what) {
  return what + "." + std::to_string(getpid()) + ".stderr.log";
}

inline std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Waits (bounded) until the log at `path` holds `needle`.
inline bool log_says(const std::string& path, const std::string& needle) {
  return wait_until([&] { return file_text(path).find(needle) != std::string::npos; });
}

}  // namespace imhash::test
