// The one strict reader of JSON members, shared by every decoder of operator and network JSON:
// table files (common/routing/table_json.h), the control protocol
// (common/routing/control_protocol.h) and the admin API (config_server/admin_handler.h). It reads a
// parsed boost::json::value (parse_strict_json in common/codec/json_check.h finds syntax errors and
// duplicate keys first, where a format wants that).
//
// A JsonObject hands out its members, a JsonArray its elements, and a JsonValue (either of them)
// converts itself: integers within bounds, ids given as an integer or a decimal string, strings,
// enum choices, finite numbers, nested objects and arrays. A member is required (need) or optional
// (get: when absent, reading it succeeds and leaves the destination as it was). Keys no need() or
// get() asked for are rejected by finish() or ignored, as each format wants: table files and the
// admin API reject them, so a typo is loud; the control protocol ignores them, so nodes and config
// servers of different versions interoperate.
//
// The first problem becomes one sentence in the caller's `error`, naming the value by its full
// path from the document's root: `"servers[2].name" must be a string, not a number`. Once `error`
// is set, every later read does nothing and returns false, so a decoder may read a run of members
// and look at the error once. Values are checked by kind, never converted: 1.0 is not an integer
// and "1" is not a number (except where an id may be a decimal string).
//
// Pure; any thread. The readers point into the document and into the caller's `error`, and a
// JsonValue into the JsonObject or JsonArray that handed it out: keep those alive while reading.
// Paths are only spelled out when an error needs one, so reading a large valid document builds
// no path strings.
#pragma once

#include <boost/container/small_vector.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "common/codec/enum_names.h"

namespace imhash {

// A value's kind with its article, for error sentences: "a string", "an array", "null", ...
const char* json_kind(const boost::json::value& v);
// A value from the input quoted back in an error sentence: a string as quoted_value() shows it (cut
// at 64 bytes, \xNN for other bytes), anything else as its JSON text, cut the same way.
std::string json_shown(const boost::json::value& v);

enum class UnknownKeys : uint8_t { kReject, kIgnore };

// Where a value is in the document: its key or index under the reader that handed it out. The
// path is spelled out only when an error names it.
struct JsonLocation {
  const JsonLocation* parent = nullptr;  // nullptr: the document's root
  std::string_view key;                  // a member's key
  size_t index = 0;                      // an element's index
  bool element = false;

  std::string path() const;  // "servers[2].name"; "" for the root
};

class JsonObject;
class JsonArray;

// One member or element (or the absence of an optional member), and where it is.
class JsonValue {
 public:
  JsonValue(const boost::json::value* value, JsonLocation at, std::string& error)
      : value_(value), at_(at), error_(&error) {}

  bool present() const { return value_ != nullptr; }
  const boost::json::value* get() const { return value_; }
  std::string path() const { return at_.path(); }  // "servers[2].name"

  // Each of these returns true when `out` holds the value or an optional member is absent (`out`
  // is then untouched), and false with the error set otherwise.
  //
  // An integer in [min, max] (a JSON integer: no fraction, no exponent).
  template <typename T>
  bool integer(T& out, uint64_t min = 0, uint64_t max = std::numeric_limits<T>::max()) {
    uint64_t wide = 0;
    if (!read_integer(min, max, wide)) return false;
    if (present()) out = static_cast<T>(wide);
    return true;
  }
  // An id 0..2^64-1: a JSON integer or a decimal string (parse_decimal_id), for clients whose JSON
  // numbers are doubles and would round ids above 2^53.
  bool id(uint64_t& out);
  bool string(std::string& out);
  bool boolean(bool& out);
  // Any finite number; checked only (read the value with get()).
  bool number();
  // A string naming one of `values` (as `name` names them).
  template <typename E, size_t N>
  bool choice(E& out, const std::array<E, N>& values, const char* (*name)(E)) {
    std::string text;
    if (!read_word(text, [&] { return name_list(values, name); })) return false;
    if (!present()) return true;
    if (const std::optional<E> e = parse_name(text, values, name)) {
      out = *e;
      return true;
    }
    return fail("must be " + name_list(values, name) + " (got " + json_shown(*value_) + ")");
  }
  // An object: its members. Absent (optional): a reader of no members, whose need() reports
  // nothing (check present() first where an optional object has required members).
  JsonObject object(UnknownKeys unknown);
  // An array of min_size .. max_size elements. Absent (optional): a reader of no elements.
  JsonArray array(size_t max_size, size_t min_size = 0);

  // Sets the error `"PATH" RULE` ("\"servers[0].name\" must not be empty") and returns false.
  bool fail(std::string_view rule);

 private:
  // True if there is nothing to do: an error is set already, or the value is absent.
  bool skip() const { return !error_->empty() || !value_; }
  bool read_integer(uint64_t min, uint64_t max, uint64_t& out);
  template <typename Choices>
  bool read_word(std::string& out, Choices choices) {
    if (skip()) return error_->empty();
    if (!value_->is_string()) return fail("must be " + choices() + ", not " + json_kind(*value_));
    return string(out);
  }

  const boost::json::value* value_;
  JsonLocation at_;
  std::string* error_;
};

// The members of one object.
class JsonObject {
 public:
  JsonObject(const boost::json::object* object, JsonLocation at, UnknownKeys unknown,
             std::string& error)
      : object_(object), at_(at), unknown_(unknown), error_(&error) {}
  // The document's root, which must be an object; `what` names the document in the sentence that
  // says it is not one ("the table must be a JSON object, not an array").
  static JsonObject root(const boost::json::value& doc, std::string_view what, UnknownKeys unknown,
                         std::string& error);

  // A required member: its absence is the error `"PATH" is missing`.
  JsonValue need(std::string_view key);
  // An optional member.
  JsonValue get(std::string_view key);
  // With UnknownKeys::kReject: the error `unknown key "PATH" (expected KEYS)` for the first key
  // that no need() or get() asked for. Call it after asking for every key the format has.
  bool finish();

  bool ok() const { return error_->empty(); }
  const std::string& error() const { return *error_; }
  std::string path() const { return at_.path(); }
  // Every member as it is (none when absent or not an object).
  const boost::json::object& members() const;

 private:
  JsonValue member(std::string_view key, bool required);

  const boost::json::object* object_;
  JsonLocation at_;
  UnknownKeys unknown_;
  std::string* error_;
  // UnknownKeys::kReject: the keys asked for, in order, for finish() and its "expected" list.
  boost::container::small_vector<std::string_view, 8> asked_;
};

// The elements of one array.
class JsonArray {
 public:
  JsonArray(const boost::json::array* array, JsonLocation at, std::string& error)
      : array_(array), at_(at), error_(&error) {}
  size_t size() const;
  JsonValue operator[](size_t i) const;  // "servers[2]"

 private:
  const boost::json::array* array_;
  JsonLocation at_;
  std::string* error_;
};

}  // namespace imhash
