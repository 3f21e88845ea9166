#include "harness/run_logs.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

namespace imhash::test {

namespace fs = std::filesystem;

namespace {

struct Registry {
  std::mutex mutex;
  std::string dir;                 // "" until begin(): the working directory
  std::vector<std::string> files;  // recorded in this run, first-recorded order
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

// A test's name as a file name: letters, digits, '.', '-' kept, runs of anything else one '_',
// at most 80 characters (ctest names are long sentences).
std::string sanitised(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-';
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
    if (out.size() >= 80) break;
  }
  while (!out.empty() && (out.back() == '_' || out.back() == '.')) out.pop_back();
  return out.empty() ? "run" : out;
}

void record_locked(Registry& r, const std::string& file) {
  if (std::find(r.files.begin(), r.files.end(), file) == r.files.end()) r.files.push_back(file);
}

std::string dir_locked(const Registry& r) { return r.dir.empty() ? absolute(".") : r.dir; }

}  // namespace

void RunLogs::begin(const std::string& dir) {
  const std::string a = absolute(dir);
  std::error_code ec;
  fs::create_directories(a, ec);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.dir = a;
  r.files.clear();
}

std::string RunLogs::begin_test(const std::string& root, const std::string& test_name) {
  const std::string name = sanitised(test_name);
  const std::string prefix = name + ".";
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> earlier;  // runs whose process is gone
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0 || !entry.is_directory(ec)) continue;
    const std::string rest = file.substr(prefix.size());
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(rest.c_str(), nullptr, 10);
    if (pid > 0 && pid != getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      earlier.emplace_back(fs::last_write_time(entry.path(), ec), entry.path());
    }
  }
  // The newest ones stay: a failed run's files were lost to the next run of its test (a nemesis
  // seed's write_lost went untraced so).
  std::sort(earlier.begin(), earlier.end(), std::greater<>());
  for (size_t i = kEarlierRunsKept; i < earlier.size(); ++i) fs::remove_all(earlier[i].second, ec);
  const std::string dir = (fs::path(root) / (prefix + std::to_string(getpid()))).string();
  begin(dir);
  return RunLogs::dir();
}

std::string RunLogs::dir() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return dir_locked(r);
}

std::string RunLogs::path(const std::string& name) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::string file = (fs::path(dir_locked(r)) / (name + ".log")).string();
  record_locked(r, file);
  return file;
}

std::string RunLogs::fresh_name(const std::string& stem) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const std::string dir = dir_locked(r);
  // Any recorded file that starts with the candidate and a separator counts as a use of it
  // ("etcd.m0.log" uses the stem "etcd").
  const auto used = [&](const std::string& candidate) {
    const std::string base = (fs::path(dir) / candidate).string();
    return std::any_of(r.files.begin(), r.files.end(), [&](const std::string& f) {
      return f.rfind(base, 0) == 0 && f.size() > base.size() &&
             (f[base.size()] == '.' || f[base.size()] == '-');
    });
  };
  if (!used(stem)) return stem;
  for (int n = 2;; ++n) {
    const std::string candidate = stem + "-" + std::to_string(n);
    if (!used(candidate)) return candidate;
  }
}

void RunLogs::record(const std::string& file) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  record_locked(r, absolute(file));
}

std::vector<std::string> RunLogs::files() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.files;
}

std::string RunLogs::tails(size_t lines) {
  std::string out;
  for (const std::string& file : files()) {
    size_t total = 0;
    const std::string tail = tail_of_file(file, lines, &total);
    out += "---- " + file;
    if (!fs::exists(file)) {
      out += " (not created)\n";
      continue;
    }
    if (total == 0) {
      out += " (empty)\n";
      continue;
    }
    out += " (last " + std::to_string(std::min(lines, total)) + " of " + std::to_string(total) +
           " lines)\n" + tail;
    if (!tail.empty() && tail.back() != '\n') out += '\n';
  }
  return out;
}

std::string tail_of_file(const std::string& path, size_t lines, size_t* total) {
  std::ifstream in(path);
  std::deque<std::string> kept;
  size_t n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    kept.push_back(std::move(line));
    if (kept.size() > lines) kept.pop_front();
  }
  if (total != nullptr) *total = n;
  std::string out;
  for (const auto& line : kept) out += line + '\n';
  return out;
}

}  // namespace imhash::test
