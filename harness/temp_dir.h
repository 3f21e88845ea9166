// TempDir: a fresh directory under the system's temporary directory for one test, removed (with
// what the test left in it) when it goes out of scope. The name holds the process id, so test
// binaries run at the same time do not meet. Used from the test's thread.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace imhash::test {

struct TempDir {
  // "/tmp/imhash_<prefix>_<pid>_<name>", empty at the start.
  TempDir(const std::string& prefix, const std::string& name)
      : path((std::filesystem::temp_directory_path() /
              ("imhash_" + prefix + "_" + std::to_string(getpid()) + "_" + name))
                 .string()) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace imhash::test
