// Strict JSON checks shared by the decoders of operator and network JSON (table files, the admin
// API): one pass of Boost.JSON's SAX parser that finds syntax errors with their position and
// duplicate keys, which Boost.JSON's DOM parser would silently collapse (the last one wins).
// Pure; any thread.
#pragma once

#include <boost/json/error.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace imhash {

struct JsonCheck {
  size_t used = 0;                // bytes the parser consumed
  std::string duplicate;          // the first duplicate key, if any
  boost::json::error_code error;  // a syntax error, if any
  // One well-formed document, nothing after it, no duplicate key.
  bool ok(std::string_view text) const {
    return !error && duplicate.empty() && used == text.size();
  }
};

JsonCheck check_json(std::string_view text, const boost::json::parse_options& options);

// "line L, column C" of `offset` in `text`, for error sentences.
std::string json_position(std::string_view text, size_t offset);

// One strict JSON document (depth at most 32, nothing after it, no duplicate key) parsed, or
// nullopt with `error` set to one sentence: `invalid JSON at line 1, column 9: ...` or
// `duplicate key "a" at line 1, column 12 (each key may appear once in an object)`. Does not
// throw, except std::bad_alloc.
std::optional<boost::json::value> parse_strict_json(std::string_view text, std::string& error);

}  // namespace imhash
