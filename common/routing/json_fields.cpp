#include "common/routing/json_fields.h"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <cmath>

#include "common/codec/printable.h"
#include "common/routing/table_text.h"

namespace json = boost::json;

namespace imhash {

const char* json_kind(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

std::string json_shown(const json::value& v) {
  if (const json::string* s = v.if_string()) return quoted_value(std::string_view(*s));
  return printable(json::serialize(v), 64);
}

// ---- JsonLocation -------------------------------------------------------------------------------

std::string JsonLocation::path() const {
  if (!parent) return {};
  std::string out = parent->path();
  if (element) return out + "[" + std::to_string(index) + "]";
  if (!out.empty()) out += '.';
  out += key;
  return out;
}

// ---- JsonValue ----------------------------------------------------------------------------------

bool JsonValue::fail(std::string_view rule) {
  if (error_->empty()) *error_ = quoted_value(path()) + " " + std::string(rule);
  return false;
}

bool JsonValue::read_integer(uint64_t min, uint64_t max, uint64_t& out) {
  if (skip()) return error_->empty();
  const json::value& v = *value_;
  if (v.is_uint64() || (v.is_int64() && v.get_int64() >= 0)) {
    const uint64_t n = v.is_uint64() ? v.get_uint64() : static_cast<uint64_t>(v.get_int64());
    if (n >= min && n <= max) {
      out = n;
      return true;
    }
  }
  const std::string rule =
      "must be an integer between " + std::to_string(min) + " and " + std::to_string(max);
  if (v.is_number()) return fail(rule + " (got " + json_shown(v) + ")");
  return fail(rule + ", not " + json_kind(v));
}

bool JsonValue::id(uint64_t& out) {
  if (skip()) return error_->empty();
  if (const json::string* s = value_->if_string()) {
    if (const std::optional<uint64_t> id = parse_decimal_id(std::string_view(*s))) {
      out = *id;
      return true;
    }
    return fail("must be a decimal id between 0 and 18446744073709551615 (got " +
                json_shown(*value_) + ")");
  }
  if (value_->is_number()) return integer(out);
  return fail(std::string("must be an id (an integer or a decimal string), not ") +
              json_kind(*value_));
}

bool JsonValue::string(std::string& out) {
  if (skip()) return error_->empty();
  const json::string* s = value_->if_string();
  if (!s) return fail(std::string("must be a string, not ") + json_kind(*value_));
  out.assign(s->data(), s->size());
  return true;
}

bool JsonValue::boolean(bool& out) {
  if (skip()) return error_->empty();
  const bool* b = value_->if_bool();
  if (!b) return fail(std::string("must be true or false, not ") + json_kind(*value_));
  out = *b;
  return true;
}

bool JsonValue::number() {
  if (skip()) return error_->empty();
  if (!value_->is_number()) return fail(std::string("must be a number, not ") + json_kind(*value_));
  if (value_->is_double() && !std::isfinite(value_->get_double())) {
    return fail("must be a finite number (got " + json_shown(*value_) + ")");
  }
  return true;
}

JsonObject JsonValue::object(UnknownKeys unknown) {
  const json::object* o = nullptr;
  if (!skip()) {
    o = value_->if_object();
    if (!o) fail(std::string("must be an object, not ") + json_kind(*value_));
  }
  return JsonObject(o, at_, unknown, *error_);
}

JsonArray JsonValue::array(size_t max_size, size_t min_size) {
  const json::array* a = nullptr;
  if (!skip()) {
    a = value_->if_array();
    if (!a) {
      fail(std::string("must be an array, not ") + json_kind(*value_));
    } else if (a->size() < min_size) {
      fail(min_size == 1 ? "must not be empty"
                         : "must have at least " + std::to_string(min_size) + " entries");
    } else if (a->size() > max_size) {
      fail("has " + std::to_string(a->size()) + " entries; at most " + std::to_string(max_size) +
           " are allowed");
    }
    if (!error_->empty()) a = nullptr;
  }
  return JsonArray(a, at_, *error_);
}

// ---- JsonObject ---------------------------------------------------------------------------------

JsonObject JsonObject::root(const json::value& doc, std::string_view what, UnknownKeys unknown,
                            std::string& error) {
  const json::object* o = doc.if_object();
  if (!o && error.empty()) {
    error = std::string(what) + " must be a JSON object, not " + json_kind(doc);
  }
  return JsonObject(o, JsonLocation{}, unknown, error);
}

JsonValue JsonObject::member(std::string_view key, bool required) {
  if (unknown_ == UnknownKeys::kReject) asked_.push_back(key);
  const json::value* v = object_ ? object_->if_contains(key) : nullptr;
  JsonValue out(v, JsonLocation{&at_, key}, *error_);
  if (!v && required && object_) out.fail("is missing");
  return out;
}

JsonValue JsonObject::need(std::string_view key) { return member(key, true); }

JsonValue JsonObject::get(std::string_view key) { return member(key, false); }

bool JsonObject::finish() {
  if (!error_->empty()) return false;
  if (!object_ || unknown_ == UnknownKeys::kIgnore) return true;
  for (const auto& entry : *object_) {
    const std::string_view key(entry.key());
    if (std::find(asked_.begin(), asked_.end(), key) != asked_.end()) continue;
    std::string expected;
    for (std::string_view k : asked_) {
      if (!expected.empty()) expected += ", ";
      expected += k;
    }
    *error_ = "unknown key " + quoted_value(JsonLocation{&at_, key}.path()) + " (expected " +
              expected + ")";
    return false;
  }
  return true;
}

const json::object& JsonObject::members() const {
  static const json::object kNone;
  return object_ ? *object_ : kNone;
}

// ---- JsonArray ----------------------------------------------------------------------------------

size_t JsonArray::size() const { return array_ ? array_->size() : 0; }

JsonValue JsonArray::operator[](size_t i) const {
  return JsonValue(&(*array_)[i], JsonLocation{&at_, {}, i, true}, *error_);
}

}  // namespace imhash
