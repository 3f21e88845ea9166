// The two shapes of the log lines every imhash program writes on stderr (--log-format):
//   text (the default), for people:  2024-05-01T10:00:00.123 hash_server info table version 3
//   installed json, for journald and log shippers, one object per line:
//     {"time":"2024-05-01T10:00:00.123+00:00","level":"info","logger":"hash_server","message":"..."}
// In json the message is a JSON string whatever it holds: quotes, backslashes and control
// characters are escaped, and bytes that are not UTF-8 become U+FFFD, so every line parses.
// Plain functions; the formatters they make are used by spdlog on any thread.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace imhash {

enum class LogFormat { kText, kJson };

// "text" or "json"; nothing for anything else.
std::optional<LogFormat> parse_log_format(std::string_view name);

std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format);

// `text` as a quoted JSON string (what the json format writes for a message).
std::string json_quoted(std::string_view text);

}  // namespace imhash
