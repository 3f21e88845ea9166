#include "tools/bench/config_log.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace imhash::bench {

double log_stamp_s(const std::string& line) {
  std::tm tm{};
  double sec = 0;
  if (std::sscanf(line.c_str(), "%d-%d-%dT%d:%d:%lf", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &sec) != 6) {
    throw std::runtime_error("no time stamp on the log line: " + line);
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + sec;
}

std::streamoff log_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::streamoff>(n);
}

std::vector<std::string> log_lines_from(const std::string& path, std::streamoff from) {
  std::ifstream in(path);
  in.seekg(from);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!in.eof()) out.push_back(std::move(line));
  }
  return out;
}

}  // namespace imhash::bench
