// --log-format: json lines parse with Boost.JSON whatever the message holds; text stays as it was.
#include "common/runtime/log_format.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <sstream>
#include <string>
#include <vector>

using namespace imhash;

namespace {

// Logs each message through a logger with `format`; returns the lines written.
std::vector<std::string> log_lines(LogFormat format, const std::vector<std::string>& messages) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test_prog", sink);
  logger.set_formatter(make_log_formatter(format));
  logger.set_level(spdlog::level::trace);
  for (const auto& m : messages) logger.warn("{}", m);
  logger.flush();
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("log_format: every json line is one object that Boost.JSON parses") {
  const char control[] = "control \x01\x1f and a NUL \0 byte";
  const std::vector<std::string> messages = {
      "plain",
      R"(a "quoted" name)",
      R"(C:\path\to\state and a trailing backslash \)",
      "two\nlines\tand a tab",
      std::string(control, sizeof control - 1),
      "UTF-8 stays: caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
      "not UTF-8: \xff\xfe, cut \xe2\x9c, overlong \xc0\xaf, surrogate \xed\xa0\x80",
      R"({"looks": "like json"})",
  };
  const auto lines = log_lines(LogFormat::kJson, messages);
  REQUIRE(lines.size() == messages.size());  // a newline in a message never splits its line
  for (size_t i = 0; i < lines.size(); ++i) {
    CAPTURE(lines[i]);
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(lines[i], ec);
    REQUIRE_FALSE(ec);
    const auto& o = v.as_object();
    CHECK(o.at("level").as_string() == "warning");
    CHECK(o.at("logger").as_string() == "test_prog");
    CHECK(o.at("time").as_string().size() == std::string("2024-05-01T10:00:00.123+00:00").size());
    if (i != 6) CHECK(o.at("message").as_string() == messages[i]);
  }
  // Each byte that is not part of a UTF-8 sequence became U+FFFD.
  CHECK(boost::json::parse(lines[6]).at("message").as_string() ==
        "not UTF-8: \xef\xbf\xbd\xef\xbf\xbd, cut \xef\xbf\xbd\xef\xbf\xbd, overlong "
        "\xef\xbf\xbd\xef\xbf\xbd, surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_CASE("log_format: text is the time, the program, the level and the message") {
  const auto lines = log_lines(LogFormat::kText, {R"(say "hi")"});
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].size() == std::string("2024-05-01T10:00:00.123 ").size() +
                               std::string(R"(test_prog warning say "hi")").size());
  CHECK(lines[0].ends_with(R"( test_prog warning say "hi")"));
}

TEST_CASE("log_format: names") {
  CHECK(parse_log_format("text") == LogFormat::kText);
  CHECK(parse_log_format("json") == LogFormat::kJson);
  CHECK_FALSE(parse_log_format("JSON").has_value());
  CHECK_FALSE(parse_log_format("").has_value());
  CHECK(json_quoted(R"(a"b\c)") == R"("a\"b\\c")");
}
