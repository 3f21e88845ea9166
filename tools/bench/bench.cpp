// The frame's plain parts (bench.h): settings read with defaults and help, the result's report
// lines, the scenario registry, and InDirectory. Main thread only.
#include "tools/bench/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace imhash::bench {

namespace {

// "KEY = DEFAULT  help", aligned so that a scenario's --help reads as a table.
std::string help_line(const std::string& key, const std::string& fallback, std::string_view help) {
  std::string left = "  " + key + " = " + (fallback.empty() ? "\"\"" : fallback);
  if (left.size() < 36) left.resize(36, ' ');
  return left + "  " + std::string(help);
}

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

const std::string* Settings::find(const std::string& key) {
  read_[key] = true;
  const auto it = given_.find(key);
  return it == given_.end() ? nullptr : &it->second;
}

int64_t Settings::integer(const std::string& key, int64_t fallback, std::string_view help) {
  help_.push_back(help_line(key, std::to_string(fallback), help));
  int64_t value = fallback;
  if (const std::string* given = find(key)) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(given->c_str(), &end, 10);
    if (given->empty() || *end != '\0' || errno != 0) {
      throw std::invalid_argument("--set " + key + "=" + *given + ": not an integer");
    }
    value = v;
  }
  used_[key] = value;
  return value;
}

double Settings::real(const std::string& key, double fallback, std::string_view help) {
  help_.push_back(help_line(key, number_text(fallback), help));
  double value = fallback;
  if (const std::string* given = find(key)) {
    char* end = nullptr;
    value = std::strtod(given->c_str(), &end);
    if (given->empty() || *end != '\0') {
      throw std::invalid_argument("--set " + key + "=" + *given + ": not a number");
    }
  }
  used_[key] = value;
  return value;
}

std::string Settings::text(const std::string& key, const std::string& fallback,
                           std::string_view help) {
  help_.push_back(help_line(key, fallback, help));
  const std::string* given = find(key);
  std::string value = given ? *given : fallback;
  used_[key] = value;
  return value;
}

std::vector<std::string> Settings::words(const std::string& key, const std::string& fallback,
                                         std::string_view help) {
  std::string list = text(key, fallback, help);
  for (char& c : list) {
    if (c == ',') c = ' ';
  }
  std::istringstream in(list);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<int64_t> Settings::integers(const std::string& key, const std::string& fallback,
                                        std::string_view help) {
  std::vector<int64_t> out;
  for (const std::string& w : words(key, fallback, help)) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(w.c_str(), &end, 10);
    if (*end != '\0' || errno != 0) {
      throw std::invalid_argument("--set " + key + ": \"" + w + "\" is not an integer");
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> Settings::unread() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : given_) {
    if (!read_.count(key)) out.push_back(key);
  }
  return out;
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buf[1024];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return std::string(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

void Result::say(const std::string& line) {
  std::cout << line << std::endl;  // flushed: a long scenario shows its progress as it goes
  report_.emplace_back(line);
}

namespace {
std::map<std::string_view, Scenario>& registry() {
  static std::map<std::string_view, Scenario> all;  // built at static initialisation
  return all;
}
}  // namespace

const std::map<std::string_view, Scenario>& scenarios() { return registry(); }

bool register_scenario(Scenario scenario) {
  if (!registry().emplace(scenario.name, scenario).second) {
    std::fprintf(stderr, "imhash_bench: scenario %.*s registered twice\n",
                 static_cast<int>(scenario.name.size()), scenario.name.data());
    std::abort();
  }
  return true;
}

InDirectory::InDirectory(const std::string& path)
    : previous_(std::filesystem::current_path().string()) {
  std::filesystem::create_directories(path);
  if (chdir(path.c_str()) != 0) {
    throw std::runtime_error("cannot enter " + path + ": " + std::strerror(errno));
  }
}

InDirectory::~InDirectory() {
  if (chdir(previous_.c_str()) != 0) {
    std::fprintf(stderr, "imhash_bench: cannot return to %s\n", previous_.c_str());
  }
}

}  // namespace imhash::bench
