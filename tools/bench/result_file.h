// The result file: where a run's JSON goes by default and how it is written (indented, keys in
// the order the driver put them, so that committed results diff line by line). Main thread only.
#pragma once

#include <boost/json.hpp>
#include <string>

namespace imhash::bench {

// "20240102-130405" (UTC) and "2024-01-02T13:04:05Z" for the same moment.
struct Stamp {
  std::string file;
  std::string iso;
  static Stamp now();
};

// SOURCE/docs/results/SCENARIO/STAMP-COMMIT7.json
std::string default_result_path(const std::string& source_dir, const std::string& scenario,
                                const Stamp& stamp, const std::string& commit);

// `value` as indented JSON.
std::string pretty(const boost::json::value& value);

// Writes `value` to `path` (its directories made; through a temporary file and a rename, so a
// reader never sees half a result); throws std::runtime_error if it cannot.
void write_result(const std::string& path, const boost::json::value& value);

}  // namespace imhash::bench
