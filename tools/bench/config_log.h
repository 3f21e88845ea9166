// The config server's text log as the scenarios that time what it logs read it (a refill's start
// and end, a stream's end; spdlog's text pattern "2024-05-01T12:34:56.789 config_server info
// ..."): the stamp a line starts with, and the lines written after a point (what a step added to
// the log). Main thread only (the driver's).
#pragma once

#include <ios>
#include <string>
#include <vector>

namespace imhash::bench {

// The stamp `line` starts with, in seconds (read as UTC: only differences between two lines of
// one log mean anything). Throws std::runtime_error if the line has none.
double log_stamp_s(const std::string& line);

// The size of the log at `path` now, bytes (0 if it does not exist yet): a point to read from.
std::streamoff log_size(const std::string& path);

// The complete lines of the log at `path` from byte `from` on (a last line without its newline,
// still being written, is left out).
std::vector<std::string> log_lines_from(const std::string& path, std::streamoff from);

}  // namespace imhash::bench
