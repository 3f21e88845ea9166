// The one strict JSON reader (common/routing/json_fields.h) and the strict parse in front of it
// (parse_strict_json in common/codec/json_check.h): every kind of member, required and optional,
// unknown keys rejected or ignored, and the error sentences with full paths.
#include "common/routing/json_fields.h"

#include <doctest/doctest.h>

#include <array>
#include <boost/json.hpp>
#include <string>

#include "common/codec/json_check.h"

using namespace imhash;
namespace json = boost::json;

namespace {

enum class Color : uint8_t { kRed, kGreen, kBlue };
constexpr std::array kColors{Color::kRed, Color::kGreen, Color::kBlue};
const char* color_name(Color c) {
  switch (c) {
    case Color::kRed:
      return "red";
    case Color::kGreen:
      return "green";
    case Color::kBlue:
      return "blue";
  }
  return "?";
}

// Reads member "v" of `text` (an object) with `read`, returning the error ("" if it succeeded).
template <typename Read>
std::string read_v(const std::string& text, Read read) {
  const json::value doc = json::parse(text);
  std::string error;
  JsonObject o = JsonObject::root(doc, "the document", UnknownKeys::kIgnore, error);
  const bool ok = read(o);
  CHECK(ok == error.empty());
  return error;
}

}  // namespace

TEST_CASE("json_fields: integers within bounds, by kind") {
  uint32_t n = 7;
  CHECK(read_v(R"({"v": 42})", [&](JsonObject& o) { return o.need("v").integer(n); }) == "");
  CHECK(n == 42);
  CHECK(read_v(R"({"v": -1})", [&](JsonObject& o) { return o.need("v").integer(n); }) ==
        R"("v" must be an integer between 0 and 4294967295 (got -1))");
  CHECK(read_v(R"({"v": 4294967296})", [&](JsonObject& o) { return o.need("v").integer(n); }) ==
        R"("v" must be an integer between 0 and 4294967295 (got 4294967296))");
  CHECK(read_v(R"({"v": 1.0})", [&](JsonObject& o) { return o.need("v").integer(n); }) ==
        R"("v" must be an integer between 0 and 4294967295 (got 1E0))");
  CHECK(read_v(R"({"v": "1"})", [&](JsonObject& o) { return o.need("v").integer(n); }) ==
        R"("v" must be an integer between 0 and 4294967295, not a string)");
  CHECK(read_v(R"({"v": 0})", [&](JsonObject& o) { return o.need("v").integer(n, 1, 1024); }) ==
        R"("v" must be an integer between 1 and 1024 (got 0))");
  CHECK(read_v(R"({"v": null})", [&](JsonObject& o) { return o.need("v").integer(n, 1, 1024); }) ==
        R"("v" must be an integer between 1 and 1024, not null)");
  uint64_t wide = 0;
  CHECK(read_v(R"({"v": 18446744073709551615})",
               [&](JsonObject& o) { return o.need("v").integer(wide); }) == "");
  CHECK(wide == 18446744073709551615u);
  CHECK(read_v(R"({"v": -0})", [&](JsonObject& o) { return o.need("v").integer(wide); }) == "");
  CHECK(wide == 0);
}

TEST_CASE("json_fields: required and optional members") {
  uint64_t n = 5;
  CHECK(read_v(R"({})", [&](JsonObject& o) { return o.get("v").integer(n); }) == "");
  CHECK(n == 5);  // absent: untouched
  CHECK(read_v(R"({})", [&](JsonObject& o) { return o.need("v").integer(n); }) ==
        R"("v" is missing)");
  CHECK(read_v(R"({"v": 1})",
               [&](JsonObject& o) { return o.get("v").present() && !o.get("w").present(); }) == "");
}

TEST_CASE("json_fields: ids are integers or decimal strings") {
  uint64_t id = 0;
  auto read = [&](const std::string& text) {
    return read_v(text, [&](JsonObject& o) { return o.need("v").id(id); });
  };
  CHECK(read(R"({"v": "18446744073709551615"})") == "");
  CHECK(id == 18446744073709551615u);
  CHECK(read(R"({"v": 12})") == "");
  CHECK(id == 12);
  CHECK(read(R"({"v": "-1"})") ==
        R"("v" must be a decimal id between 0 and 18446744073709551615 (got "-1"))");
  CHECK(
      read(R"({"v": "18446744073709551616"})") ==
      R"("v" must be a decimal id between 0 and 18446744073709551615 (got "18446744073709551616"))");
  CHECK(read(R"({"v": -1})") ==
        R"("v" must be an integer between 0 and 18446744073709551615 (got -1))");
  CHECK(read(R"({"v": 1.5})") ==
        R"("v" must be an integer between 0 and 18446744073709551615 (got 1.5E0))");
  CHECK(read(R"({"v": true})") ==
        R"("v" must be an id (an integer or a decimal string), not a boolean)");
}

TEST_CASE("json_fields: strings, numbers and choices") {
  std::string s = "old";
  CHECK(read_v(R"({"v": "x"})", [&](JsonObject& o) { return o.need("v").string(s); }) == "");
  CHECK(s == "x");
  CHECK(read_v(R"({"v": 3})", [&](JsonObject& o) { return o.need("v").string(s); }) ==
        R"("v" must be a string, not a number)");
  CHECK(read_v(R"({"v": 3.5})", [&](JsonObject& o) { return o.need("v").number(); }) == "");
  CHECK(read_v(R"({"v": [1]})", [&](JsonObject& o) { return o.need("v").number(); }) ==
        R"("v" must be a number, not an array)");

  Color c = Color::kRed;
  auto choose = [&](const std::string& text) {
    return read_v(text, [&](JsonObject& o) { return o.need("v").choice(c, kColors, color_name); });
  };
  CHECK(choose(R"({"v": "blue"})") == "");
  CHECK(c == Color::kBlue);
  CHECK(choose(R"({"v": "Blue"})") == R"("v" must be "red", "green" or "blue" (got "Blue"))");
  CHECK(choose(R"({"v": {}})") == R"("v" must be "red", "green" or "blue", not an object)");
  // Values quoted back are cut after 64 bytes, other bytes shown as \xNN.
  CHECK(choose(R"({"v": "a\u0001b"})") == R"("v" must be "red", "green" or "blue" (got "a\x01b"))");
  CHECK(choose("{\"v\": \"" + std::string(100, 'z') + "\"}") ==
        std::string(R"("v" must be "red", "green" or "blue" (got ")") + std::string(64, 'z') +
            R"(..."))");
}

TEST_CASE("json_fields: nested objects and arrays name members by their full path") {
  const json::value doc =
      json::parse(R"({"servers": [{"name": "a"}, {"name": "b"}, {"name": 7}], "n": 1})");
  std::string error;
  JsonObject root = JsonObject::root(doc, "the table", UnknownKeys::kReject, error);
  JsonArray servers = root.need("servers").array(10);
  REQUIRE(servers.size() == 3);
  std::string name;
  CHECK(servers[0].object(UnknownKeys::kReject).need("name").string(name));
  CHECK(name == "a");
  JsonObject third = servers[2].object(UnknownKeys::kReject);
  CHECK_FALSE(third.need("name").string(name));
  CHECK(error == R"("servers[2].name" must be a string, not a number)");
  // Once an error is set, later reads do nothing and fail.
  uint64_t n = 9;
  CHECK_FALSE(root.need("n").integer(n));
  CHECK(n == 9);
  CHECK_FALSE(root.finish());
  CHECK(error == R"("servers[2].name" must be a string, not a number)");
}

TEST_CASE("json_fields: arrays within bounds, objects by kind, the root") {
  const json::value doc = json::parse(R"({"a": [], "b": [1, 2, 3], "c": 5, "d": [true]})");
  auto array_error = [&](std::string_view key, size_t max, size_t min) {
    std::string error;
    JsonObject o = JsonObject::root(doc, "it", UnknownKeys::kIgnore, error);
    o.need(key).array(max, min);
    return error;
  };
  CHECK(array_error("a", 5, 1) == R"("a" must not be empty)");
  CHECK(array_error("b", 2, 0) == R"("b" has 3 entries; at most 2 are allowed)");
  CHECK(array_error("c", 2, 0) == R"("c" must be an array, not a number)");
  CHECK(array_error("b", 3, 1) == "");

  std::string error;
  JsonObject o = JsonObject::root(doc, "it", UnknownKeys::kIgnore, error);
  JsonArray d = o.need("d").array(5);
  d[0].object(UnknownKeys::kReject);
  CHECK(error == R"("d[0]" must be an object, not a boolean)");

  for (const char* text : {"[]", "3", "null", R"("x")"}) {
    CAPTURE(text);
    std::string e;
    JsonObject r = JsonObject::root(json::parse(text), "the request body", UnknownKeys::kReject, e);
    CHECK(e.rfind("the request body must be a JSON object, not ", 0) == 0);
    CHECK_FALSE(r.finish());
  }
}

TEST_CASE("json_fields: unknown keys are rejected or ignored, as the format wants") {
  const json::value doc = json::parse(R"({"name": "a", "shard": 4, "inner": {"x": 1, "y": 2}})");
  {
    std::string error;
    JsonObject o = JsonObject::root(doc, "it", UnknownKeys::kReject, error);
    std::string name;
    o.need("name").string(name);
    o.get("shards");
    JsonObject inner = o.get("inner").object(UnknownKeys::kReject);
    inner.need("x");
    CHECK_FALSE(inner.finish());
    CHECK(error == R"(unknown key "inner.y" (expected x))");
  }
  {
    std::string error;
    JsonObject o = JsonObject::root(doc, "it", UnknownKeys::kReject, error);
    o.need("name");
    o.get("shards");
    o.get("inner");
    CHECK_FALSE(o.finish());
    CHECK(error == R"(unknown key "shard" (expected name, shards, inner))");
  }
  {
    std::string error;
    JsonObject o = JsonObject::root(doc, "it", UnknownKeys::kIgnore, error);
    o.need("name");
    CHECK(o.finish());
    CHECK(error.empty());
  }
}

TEST_CASE("json_check: parse_strict_json says where the text is wrong") {
  std::string error;
  CHECK(parse_strict_json(R"({"a": [1, 2]})", error));
  CHECK(error.empty());
  auto fails = [](std::string_view text) {
    std::string e;
    CHECK_FALSE(parse_strict_json(text, e));
    return e;
  };
  CHECK(fails(R"({"a": 1, "a": 2})") ==
        R"(duplicate key "a" at line 1, column 12 (each key may appear once in an object))");
  CHECK(fails("{\"a\": 1}\n{}") ==
        "invalid JSON at line 2, column 1: text after the end of the document");
  CHECK(fails("{\"a\": 1,}").rfind("invalid JSON at line 1, column 9: ", 0) == 0);
  CHECK(fails(std::string(40, '[') + std::string(40, ']')).rfind("invalid JSON at ", 0) == 0);
}
