#include "common/codec/json_check.h"

#include <algorithm>
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>

#include "common/codec/printable.h"

namespace json = boost::json;

namespace imhash {

namespace {

class DuplicateKeyFinder {
 public:
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);

  std::string duplicate;  // the first duplicate key found

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_array_begin(json::error_code&) { return true; }
  bool on_array_end(std::size_t, json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) {
    keys_.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t, json::error_code&) {
    keys_.pop_back();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, json::error_code&) { return true; }
  bool on_string(json::string_view, std::size_t, json::error_code&) { return true; }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
    key_.append(s.data(), s.size());
    std::vector<std::string>& seen = keys_.back();
    if (std::find(seen.begin(), seen.end(), key_) != seen.end()) {
      duplicate = std::move(key_);
      ec = json::error::syntax;
      return false;
    }
    seen.push_back(std::move(key_));
    key_.clear();
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t, json::string_view, json::error_code&) { return true; }
  bool on_uint64(uint64_t, json::string_view, json::error_code&) { return true; }
  bool on_double(double, json::string_view, json::error_code&) { return true; }
  bool on_bool(bool, json::error_code&) { return true; }
  bool on_null(json::error_code&) { return true; }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  std::vector<std::vector<std::string>> keys_;  // keys of each open object, innermost last
  std::string key_;
};

}  // namespace

JsonCheck check_json(std::string_view text, const json::parse_options& options) {
  json::basic_parser<DuplicateKeyFinder> parser(options);
  JsonCheck r;
  r.used = parser.write_some(false, text.data(), text.size(), r.error);
  r.duplicate = parser.handler().duplicate;
  return r;
}

std::string json_position(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

std::optional<json::value> parse_strict_json(std::string_view text, std::string& error) {
  json::parse_options options;  // strict JSON, depth 32
  const JsonCheck c = check_json(text, options);
  if (!c.ok(text)) {
    const std::string at = json_position(text, c.used);
    if (!c.duplicate.empty()) {
      error = "duplicate key " + quoted_value(c.duplicate) + " at " + at +
              " (each key may appear once in an object)";
    } else if (c.error) {
      error = "invalid JSON at " + at + ": " + c.error.message();
    } else {
      error = "invalid JSON at " + at + ": text after the end of the document";
    }
    return std::nullopt;
  }
  json::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, options);
  if (ec) {
    error = "invalid JSON: " + ec.message();
    return std::nullopt;
  }
  return v;
}

}  // namespace imhash
