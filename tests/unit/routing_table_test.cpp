// Tests of the routing table value type: JSON format, validation and the edit operations.
#include "common/routing/routing_table.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "common/codec/hash.h"
#include "config_server/table_edits.h"
#include "tests/sample_tables.h"

namespace imhash {
namespace {

using test::kHalf;
using test::kMax;

ServerInfo server(std::string name, uint32_t shards = 1, uint32_t weight = 1,
                  std::string address = "") {
  return ServerInfo{std::move(name), std::move(address), shards, weight};
}

Table modulo_table(int n) {
  Table t;
  t.version = 1;
  for (int i = 1; i <= n; ++i) t.servers.push_back(server("hash" + std::to_string(i)));
  return t;
}

// Range table: h1 [0, 99], h2 [100, 199], h3 [200, 2^64-1].
Table range_table() {
  Table t;
  t.version = 7;
  t.mode = RoutingMode::kRange;
  t.servers = {server("h1"), server("h2"), server("h3"), server("h4")};
  t.ranges = {{0, 99, "h1"}, {100, 199, "h2"}, {200, kMax, "h3"}};
  return t;
}

std::vector<IdRange> ranges_of(const TableResult& r) {
  REQUIRE_MESSAGE(r.ok(), r.error);
  return r.table->ranges;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Checks that `t` is invalid and that the message mentions every one of `parts`.
void check_invalid(const Table& t, std::initializer_list<const char*> parts) {
  std::string error = validate(t);
  CAPTURE(error);
  CHECK_FALSE(error.empty());
  for (const char* part : parts) CHECK_MESSAGE(contains(error, part), "missing: " << part);
  // parse_table_json reports the same problem for the same table.
  TableResult parsed = parse_table_json(table_to_json(t));
  CHECK_FALSE(parsed.ok());
  CHECK(parsed.error == error);
}

void check_parse_error(const std::string& json, std::initializer_list<const char*> parts) {
  TableResult r = parse_table_json(json);
  CAPTURE(json);
  CAPTURE(r.error);
  CHECK_FALSE(r.ok());
  for (const char* part : parts) CHECK_MESSAGE(contains(r.error, part), "missing: " << part);
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          ("imhash_rt_" + std::to_string(getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("routing_table: the example of the header parses") {
  const char* json = R"({"version": 3, "mode": "range", "modulo_hash": "mix",
    "servers": [{"name": "hash1", "address": "127.0.0.1:7001", "shards": 4, "weight": 1},
                {"name": "hash2", "address": "127.0.0.1:7002"}],
    "ranges": [{"lo": 0, "hi": 9223372036854775807, "server": "hash1"},
               {"lo": 9223372036854775808, "hi": 18446744073709551615, "server": "hash2"}]})";
  TableResult r = parse_table_json(json);
  REQUIRE_MESSAGE(r.ok(), r.error);
  const Table& t = *r.table;
  CHECK(t.version == 3);
  CHECK(t.mode == RoutingMode::kRange);
  CHECK(t.modulo_hash == ModuloHash::kMix);
  REQUIRE(t.servers.size() == 2);
  CHECK(t.servers[0] == ServerInfo{"hash1", "127.0.0.1:7001", 4, 1});
  CHECK(t.servers[1] == ServerInfo{"hash2", "127.0.0.1:7002", 1, 1});  // defaults
  REQUIRE(t.ranges.size() == 2);
  CHECK(t.ranges[0] == IdRange{0, kHalf - 1, "hash1"});
  CHECK(t.ranges[1] == IdRange{kHalf, kMax, "hash2"});
}

TEST_CASE("routing_table: defaults of the optional keys") {
  TableResult r =
      parse_table_json(R"({"version": 0, "mode": "modulo", "servers": [{"name": "a"}]})");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->modulo_hash == ModuloHash::kMix);
  CHECK(r.table->servers[0] == ServerInfo{"a", "", 1, 1});
  CHECK(r.table->ranges.empty());
  // Whitespace, an empty "ranges" outside range mode and the identity hash are accepted.
  r = parse_table_json(
      " \n{\"version\":18446744073709551615,\"mode\":\"ring\",\"modulo_hash\":\"identity\","
      "\"servers\":[{\"name\":\"a\",\"weight\":3}],\"ranges\":[]}\n ");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->version == kMax);
  CHECK(r.table->mode == RoutingMode::kRing);
  CHECK(r.table->modulo_hash == ModuloHash::kIdentity);
  CHECK(r.table->servers[0].weight == 3);
}

TEST_CASE("routing_table: JSON round trip in every mode") {
  Table modulo = modulo_table(3);
  modulo.version = 42;
  modulo.modulo_hash = ModuloHash::kIdentity;
  modulo.servers[0] = server("hash1", 8, 1, "10.0.0.1:7001");
  modulo.servers[1] = server("hash-2.b_c", 1024, 1000, "[::1]:65535");

  Table ring = modulo_table(5);
  ring.mode = RoutingMode::kRing;
  ring.version = kMax;
  ring.servers[2].weight = 3;

  Table range = range_table();
  range.ranges = {{0, 0, "h1"}, {1, kHalf, "h2"}, {kHalf + 1, kMax - 1, "h1"}, {kMax, kMax, "h4"}};

  Table even = modulo_table(7);
  even.mode = RoutingMode::kRange;
  even.ranges = even_ranges(even.servers);

  for (const Table& t : {modulo, ring, range, even}) {
    REQUIRE(validate(t).empty());
    std::string json = table_to_json(t);
    CAPTURE(json);
    TableResult back = parse_table_json(json);
    REQUIRE_MESSAGE(back.ok(), back.error);
    CHECK(*back.table == t);
    CHECK(table_to_json(*back.table) == json);
  }
}

TEST_CASE("routing_table: JSON output is one line per server and per range") {
  Table t = range_table();
  t.servers[0].address = "127.0.0.1:7001";
  t.servers[0].shards = 4;
  CHECK(table_to_json(t) ==
        "{\n"
        "  \"version\": 7,\n"
        "  \"mode\": \"range\",\n"
        "  \"modulo_hash\": \"mix\",\n"
        "  \"servers\": [\n"
        "    {\"name\": \"h1\", \"address\": \"127.0.0.1:7001\", \"shards\": 4, \"weight\": 1},\n"
        "    {\"name\": \"h2\", \"address\": \"\", \"shards\": 1, \"weight\": 1},\n"
        "    {\"name\": \"h3\", \"address\": \"\", \"shards\": 1, \"weight\": 1},\n"
        "    {\"name\": \"h4\", \"address\": \"\", \"shards\": 1, \"weight\": 1}\n"
        "  ],\n"
        "  \"ranges\": [\n"
        "    {\"lo\": 0, \"hi\": 99, \"server\": \"h1\"},\n"
        "    {\"lo\": 100, \"hi\": 199, \"server\": \"h2\"},\n"
        "    {\"lo\": 200, \"hi\": 18446744073709551615, \"server\": \"h3\"}\n"
        "  ]\n"
        "}\n");
  // Even an invalid table serialises to valid JSON (strings are escaped).
  Table odd;
  odd.servers = {server("a\"b\\c\n")};
  std::string json = table_to_json(odd);
  CHECK(contains(json, R"("a\"b\\c\u000a")"));
  check_parse_error(json, {"servers[0]", "name"});
}

TEST_CASE("routing_table: JSON errors name what is wrong") {
  const std::string head = R"({"version": 1, "mode": "modulo", )";
  const std::string one = R"("servers": [{"name": "a"}])";
  const std::string range_head = R"({"version": 1, "mode": "range", "servers": [{"name": "a"}], )";
  auto error_of = [](const std::string& json) {
    TableResult r = parse_table_json(json);
    CAPTURE(json);
    CHECK_FALSE(r.ok());
    return r.error;
  };

  // Syntax, with the place.
  CHECK(error_of("") == "invalid JSON at line 1, column 1: incomplete JSON");
  check_parse_error("{\"version\": 1,\n  \"mode\": ]", {"invalid JSON", "line 2, column 11"});
  CHECK(error_of(head + one + "} x") ==
        "invalid JSON at line 1, column 62: text after the end of the document");
  check_parse_error(head + one + "} {}", {"invalid JSON at line 1, column 62"});
  check_parse_error(head + one + ", /* c */}", {"invalid JSON"});  // strict JSON: no comments
  CHECK(error_of(head + one + R"(, "version": 2})") ==
        R"(duplicate key "version" at line 1, column 70 (each key may appear once in an object))");
  CHECK(error_of(head + R"("servers": [{"name": "a", "name": "b"}]})") ==
        R"(duplicate key "name" at line 1, column 65 (each key may appear once in an object))");
  CHECK(error_of("[1, 2]") == "the table must be a JSON object, not an array");

  // Unknown and missing keys, by their full path.
  CHECK(
      error_of(head + one + R"(, "modulo_hsh": "mix"})") ==
      R"(unknown key "modulo_hsh" (expected version, mode, modulo_hash, replicas, servers, ranges))");
  CHECK(error_of(head + R"("servers": [{"name": "a", "shard": 2}]})") ==
        R"(unknown key "servers[0].shard" (expected name, address, shards, weight))");
  CHECK(error_of(range_head +
                 R"("ranges": [{"lo": 0, "hi": 18446744073709551615, "server": "a", "x": 1}]})") ==
        R"(unknown key "ranges[0].x" (expected lo, hi, server))");
  CHECK(error_of(R"({"mode": "modulo", "servers": []})") == R"("version" is missing)");
  CHECK(error_of(R"({"version": 1, "servers": []})") == R"("mode" is missing)");
  CHECK(error_of(R"({"version": 1, "mode": "modulo"})") == R"("servers" is missing)");
  CHECK(error_of(head + R"("servers": [{"shards": 2}]})") == R"("servers[0].name" is missing)");
  CHECK(error_of(range_head + R"("ranges": [{"lo": 0, "server": "a"}]})") ==
        R"("ranges[0].hi" is missing)");

  // Integers: no sign, no fraction, no exponent, within their type.
  const std::string u64_rule = "must be an integer between 0 and 18446744073709551615";
  const std::string u32_rule = "must be an integer between 0 and 4294967295";
  CHECK(error_of(R"({"version": -1, "mode": "modulo", )" + one + "}") ==
        R"("version" )" + u64_rule + " (got -1)");
  CHECK(error_of(R"({"version": 1.5, "mode": "modulo", )" + one + "}") ==
        R"("version" )" + u64_rule + " (got 1.5E0)");
  CHECK(error_of(R"({"version": 1e3, "mode": "modulo", )" + one + "}") ==
        R"("version" )" + u64_rule + " (got 1E3)");
  CHECK(error_of(R"({"version": 18446744073709551616, "mode": "modulo", )" + one + "}") ==
        R"("version" )" + u64_rule + " (got 1.8446744073709552E19)");
  CHECK(error_of(R"({"version": "1", "mode": "modulo", )" + one + "}") ==
        R"("version" )" + u64_rule + ", not a string");
  CHECK(error_of(head + R"("servers": [{"name": "a", "shards": 4294967296}]})") ==
        R"("servers[0].shards" )" + u32_rule + " (got 4294967296)");
  CHECK(error_of(head + R"("servers": [{"name": "a", "weight": -2}]})") ==
        R"("servers[0].weight" )" + u32_rule + " (got -2)");
  CHECK(error_of(head + R"("servers": [{"name": "a", "weight": true}]})") ==
        R"("servers[0].weight" )" + u32_rule + ", not a boolean");
  CHECK(error_of(range_head + R"("ranges": [{"lo": 0, "hi": -1, "server": "a"}]})") ==
        R"("ranges[0].hi" )" + u64_rule + " (got -1)");

  // Names, strings, arrays and objects.
  CHECK(error_of(R"({"version": 1, "mode": "hash", )" + one + "}") ==
        R"("mode" must be "modulo", "range" or "ring" (got "hash"))");
  CHECK(error_of(R"({"version": 1, "mode": 2, )" + one + "}") ==
        R"("mode" must be "modulo", "range" or "ring", not a number)");
  CHECK(error_of(head + R"("modulo_hash": "crc", )" + one + "}") ==
        R"("modulo_hash" must be "mix" or "identity" (got "crc"))");
  CHECK(error_of(head + R"("servers": {}})") == R"("servers" must be an array, not an object)");
  CHECK(error_of(head + R"("servers": ["a"]})") ==
        R"("servers[0]" must be an object, not a string)");
  CHECK(error_of(head + R"("servers": [{"name": "a"}, {"name": 5}]})") ==
        R"("servers[1].name" must be a string, not a number)");
  CHECK(error_of(head + R"("servers": [{"name": "a", "address": null}]})") ==
        R"("servers[0].address" must be a string, not null)");
  CHECK(error_of(head + one + R"(, "ranges": {}})") ==
        R"("ranges" must be an array, not an object)");
  CHECK(error_of(head + one + R"(, "ranges": [[]]})") ==
        R"("ranges[0]" must be an object, not an array)");
  CHECK(
      error_of(range_head + R"("ranges": [{"lo": 0, "hi": 18446744073709551615, "server": 1}]})") ==
      R"("ranges[0].server" must be a string, not a number)");
  // Parsing validates.
  CHECK(error_of(head + R"("servers": []})") == "the table has no servers");
  // Deeply nested input is refused, not recursed into.
  check_parse_error(std::string(100000, '['), {"invalid JSON"});
}

TEST_CASE("routing_table: validate accepts valid tables") {
  CHECK(validate(modulo_table(1)) == "");
  CHECK(validate(range_table()) == "");
  Table t = modulo_table(static_cast<int>(kMaxServers));
  CHECK(validate(t) == "");
  t.mode = RoutingMode::kRing;
  CHECK(validate(t) == "");
  t.servers[0].weight = t.servers[1].weight = t.servers[2].weight = 1000;
  t.servers[3].weight = 76;  // total 4096
  CHECK(validate(t) == "");
  t.servers[3].weight = 77;
  CHECK(validate(t) == "the servers' weights add up to 4097; ring mode allows at most 4096");
}

TEST_CASE("routing_table: every validation error") {
  Table t;
  check_invalid(t, {"no servers"});

  t = modulo_table(static_cast<int>(kMaxServers) + 1);
  check_invalid(t, {"1025 servers", "at most 1024"});

  for (const char* bad : {"", "has space", "a/b", "é", "x\"y"}) {
    t = modulo_table(2);
    t.servers[1].name = bad;
    check_invalid(t, {"servers[1] has the name", "A-Z a-z 0-9 . _ -"});
  }
  t = modulo_table(1);
  t.servers[0].name = std::string(kMaxServerNameLength + 1, 'a');
  check_invalid(t, {"servers[0] has the name", "1 to 64 characters"});
  t.servers[0].name = std::string(kMaxServerNameLength, 'a');
  CHECK(validate(t) == "");

  t = modulo_table(3);
  t.servers[2].name = "hash1";
  check_invalid(t, {"server name \"hash1\" appears twice", "servers[0]", "servers[2]"});

  t = modulo_table(2);
  t.servers[0].address = t.servers[1].address = "127.0.0.1:7001";
  check_invalid(t, {"hash1 and hash2 have the same address 127.0.0.1:7001"});

  for (const char* bad : {"localhost", ":7001", "host:", "host:0", "host:65536", "host:12a",
                          "ho st:1", "host:+1", "host:-1"}) {
    t = modulo_table(2);
    t.servers[1].address = bad;
    check_invalid(t, {"servers[1] (hash2): address"});
  }
  for (const char* good : {"h:1", "127.0.0.1:65535", "[::1]:7001", "example.com:80"}) {
    t = modulo_table(2);
    t.servers[1].address = good;
    CHECK(validate(t) == "");
  }

  t = modulo_table(2);
  t.servers[1].shards = 0;
  check_invalid(t, {"servers[1] (hash2) has 0 shards", "1 to 1024"});
  t.servers[1].shards = 1025;
  check_invalid(t, {"servers[1] (hash2) has 1025 shards"});
  t.servers[1].shards = 1024;
  CHECK(validate(t) == "");

  t.servers[0].weight = 0;
  check_invalid(t, {"servers[0] (hash1) has weight 0", "1 to 1000"});
  t.servers[0].weight = 1001;
  check_invalid(t, {"servers[0] (hash1) has weight 1001"});

  t = modulo_table(5);
  t.mode = RoutingMode::kRing;
  for (auto& s : t.servers) s.weight = 1000;
  check_invalid(t, {"weights add up to 5000", "ring mode allows at most 4096"});
  t.mode = RoutingMode::kModulo;  // weights do not matter outside ring mode
  CHECK(validate(t) == "");

  t = modulo_table(2);
  t.ranges = even_ranges(t.servers);
  check_invalid(t, {"has ranges but is in modulo mode"});
  t.mode = RoutingMode::kRing;
  check_invalid(t, {"has ranges but is in ring mode"});

  t = range_table();
  t.ranges.clear();
  check_invalid(t, {"range mode needs ranges", "there are none"});

  t = range_table();
  t.ranges[0].lo = 10;
  check_invalid(t, {"the ids 0-9 are not in any range"});

  t = range_table();
  t.ranges[1] = {150, 120, "h2"};
  check_invalid(t, {"ranges[1] 150-120 (h2) ends before it starts"});

  t = range_table();
  t.ranges[1].server = "h9";
  check_invalid(t, {"ranges[1] 100-199 (h9) names the unknown server \"h9\""});

  t = range_table();
  std::swap(t.ranges[0], t.ranges[1]);
  check_invalid(t, {"not sorted", "ranges[1] 0-99 (h1) starts before ranges[0] 100-199 (h2)"});
  t = range_table();
  std::swap(t.ranges[1], t.ranges[2]);
  check_invalid(t, {"not sorted", "ranges[2] 100-199 (h2) starts before ranges[1] 200-"});

  t = range_table();
  t.ranges[1].lo = 90;
  check_invalid(t, {"the ids 90-99 are in both ranges[0] 0-99 (h1) and ranges[1] 90-199 (h2)"});
  t = range_table();
  t.ranges[1] = {50, 60, "h2"};  // wholly inside its predecessor
  check_invalid(t, {"the ids 50-60 are in both"});

  t = range_table();
  t.ranges[1].lo = 105;
  check_invalid(t, {"the ids 100-104 are not in any range", "gap between ranges[0] and ranges[1]"});

  t = range_table();
  t.ranges[2].hi = kMax - 1;
  check_invalid(t, {"the ids 18446744073709551615-18446744073709551615 are not in any range"});
}

TEST_CASE("routing_table: find_server and server_index") {
  Table t = range_table();
  CHECK(t.server_index("h1") == 0);
  CHECK(t.server_index("h4") == 3);
  CHECK(t.server_index("h5") == -1);
  CHECK(t.server_index("") == -1);
  REQUIRE(t.find_server("h3") != nullptr);
  CHECK(t.find_server("h3") == &t.servers[2]);
  CHECK(t.find_server("H3") == nullptr);
}

TEST_CASE("routing_table: load_table_file") {
  SUBCASE("missing file") {
    std::string path = temp_path("missing.json");
    TableResult r = load_table_file(path);
    CHECK_FALSE(r.ok());
    CHECK(contains(r.error, path));
    CHECK(contains(r.error, "No such file"));
  }
  SUBCASE("malformed file") {
    std::string path = temp_path("malformed.json");
    std::ofstream(path) << "{\"version\": 1,\n\"mode\": \"modulo\"\n\"servers\": []}";
    TableResult r = load_table_file(path);
    std::filesystem::remove(path);
    CHECK_FALSE(r.ok());
    CHECK(contains(r.error, path));
    CHECK(contains(r.error, "invalid JSON at line 3"));
  }
  SUBCASE("invalid table") {
    std::string path = temp_path("invalid.json");
    std::ofstream(path)
        << R"({"version": 1, "mode": "ring", "servers": [{"name": "a", "wieght": 2}]})";
    TableResult r = load_table_file(path);
    std::filesystem::remove(path);
    CHECK_FALSE(r.ok());
    CHECK(contains(r.error, path));
    CHECK(contains(
        r.error, R"(: unknown key "servers[0].wieght" (expected name, address, shards, weight))"));
  }
  SUBCASE("a directory") {
    TableResult r = load_table_file(std::filesystem::temp_directory_path().string());
    CHECK_FALSE(r.ok());
  }
  SUBCASE("valid file") {
    std::string path = temp_path("valid.json");
    Table t = range_table();
    std::ofstream(path) << table_to_json(t);
    TableResult r = load_table_file(path);
    std::filesystem::remove(path);
    REQUIRE_MESSAGE(r.ok(), r.error);
    CHECK(*r.table == t);
  }
}

TEST_CASE("routing_table: even_ranges") {
  CHECK(even_ranges({}).empty());
  CHECK(even_ranges({server("a")}) == std::vector<IdRange>{{0, kMax, "a"}});
  CHECK(even_ranges({server("a"), server("b")}) ==
        std::vector<IdRange>{{0, kHalf - 1, "a"}, {kHalf, kMax, "b"}});
  CHECK(even_ranges({server("a"), server("b"), server("c")}) ==
        std::vector<IdRange>{{0, 6148914691236517204ULL, "a"},
                             {6148914691236517205ULL, 12297829382473034409ULL, "b"},
                             {12297829382473034410ULL, kMax, "c"}});
  for (int n : {1, 2, 3, 7, 10, 1000, 1024}) {
    Table t = modulo_table(n);
    t.mode = RoutingMode::kRange;
    t.ranges = even_ranges(t.servers);
    CHECK(t.ranges.size() == static_cast<size_t>(n));
    CHECK(validate(t) == "");
    for (const IdRange& r : t.ranges) {
      // Every range has floor or ceil of 2^64 / n ids.
      const uint128 size = uint128{r.hi - r.lo} + 1;
      const uint128 floor = (uint128{1} << 64) / static_cast<unsigned>(n);
      CHECK((size == floor || size == floor + 1));
    }
  }
}

TEST_CASE("routing_table: assign_range") {
  const Table t = range_table();  // h1 [0, 99], h2 [100, 199], h3 [200, max]

  SUBCASE("inside one range") {
    CHECK(ranges_of(assign_range(t, 120, 130, "h4")) == std::vector<IdRange>{{0, 99, "h1"},
                                                                             {100, 119, "h2"},
                                                                             {120, 130, "h4"},
                                                                             {131, 199, "h2"},
                                                                             {200, kMax, "h3"}});
  }
  SUBCASE("inside a range of the same server changes nothing") {
    CHECK(ranges_of(assign_range(t, 120, 130, "h2")) == t.ranges);
    CHECK(ranges_of(assign_range(t, 100, 199, "h2")) == t.ranges);
  }
  SUBCASE("exactly one range") {
    CHECK(ranges_of(assign_range(t, 100, 199, "h4")) ==
          std::vector<IdRange>{{0, 99, "h1"}, {100, 199, "h4"}, {200, kMax, "h3"}});
  }
  SUBCASE("spanning three ranges") {
    CHECK(ranges_of(assign_range(t, 50, 250, "h4")) ==
          std::vector<IdRange>{{0, 49, "h1"}, {50, 250, "h4"}, {251, kMax, "h3"}});
  }
  SUBCASE("merges with neighbours of the same server") {
    CHECK(ranges_of(assign_range(t, 100, 150, "h1")) ==
          std::vector<IdRange>{{0, 150, "h1"}, {151, 199, "h2"}, {200, kMax, "h3"}});
    CHECK(ranges_of(assign_range(t, 150, 199, "h3")) ==
          std::vector<IdRange>{{0, 99, "h1"}, {100, 149, "h2"}, {150, kMax, "h3"}});
    // Both sides at once: h1 [0, 99] and h1 [200, max] join through [100, 199].
    Table two = t;
    two.ranges[2].server = "h1";
    CHECK(ranges_of(assign_range(two, 100, 199, "h1")) == std::vector<IdRange>{{0, kMax, "h1"}});
  }
  SUBCASE("deliberate splits elsewhere stay split") {
    Table split = t;
    split.ranges = {{0, 49, "h1"}, {50, 99, "h1"}, {100, 199, "h2"}, {200, kMax, "h3"}};
    CHECK(ranges_of(assign_range(split, 150, 160, "h4")) ==
          std::vector<IdRange>{{0, 49, "h1"},
                               {50, 99, "h1"},
                               {100, 149, "h2"},
                               {150, 160, "h4"},
                               {161, 199, "h2"},
                               {200, kMax, "h3"}});
  }
  SUBCASE("lo = 0") {
    CHECK(ranges_of(assign_range(t, 0, 9, "h4")) ==
          std::vector<IdRange>{{0, 9, "h4"}, {10, 99, "h1"}, {100, 199, "h2"}, {200, kMax, "h3"}});
    CHECK(ranges_of(assign_range(t, 0, 0, "h2")) ==
          std::vector<IdRange>{{0, 0, "h2"}, {1, 99, "h1"}, {100, 199, "h2"}, {200, kMax, "h3"}});
  }
  SUBCASE("hi = UINT64_MAX") {
    CHECK(ranges_of(assign_range(t, kMax, kMax, "h4")) ==
          std::vector<IdRange>{
              {0, 99, "h1"}, {100, 199, "h2"}, {200, kMax - 1, "h3"}, {kMax, kMax, "h4"}});
    CHECK(ranges_of(assign_range(t, 150, kMax, "h4")) ==
          std::vector<IdRange>{{0, 99, "h1"}, {100, 149, "h2"}, {150, kMax, "h4"}});
  }
  SUBCASE("the whole id space") {
    CHECK(ranges_of(assign_range(t, 0, kMax, "h4")) == std::vector<IdRange>{{0, kMax, "h4"}});
    TableResult r = assign_range(t, 0, kMax, "h1");
    REQUIRE(r.ok());
    CHECK(r.table->ranges == std::vector<IdRange>{{0, kMax, "h1"}});
    CHECK(r.table->servers == t.servers);
    CHECK(r.table->version == t.version);  // the caller bumps it
  }
  SUBCASE("errors") {
    TableResult r = assign_range(t, 10, 9, "h1");
    CHECK(contains(r.error, "cannot assign 10-9: it ends before it starts"));
    r = assign_range(t, 10, 20, "h9");
    CHECK(contains(r.error, "no server named \"h9\""));
    r = assign_range(modulo_table(2), 10, 20, "hash1");
    CHECK(contains(r.error, "cannot assign: the table is in modulo mode, not range mode"));
    Table bad = t;
    bad.ranges.pop_back();
    r = assign_range(bad, 10, 20, "h1");
    CHECK(contains(r.error, "cannot assign: the table is invalid: the ids 200-"));
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("routing_table: split_range") {
  const Table t = range_table();
  CHECK(ranges_of(split_range(t, 150)) ==
        std::vector<IdRange>{{0, 99, "h1"}, {100, 149, "h2"}, {150, 199, "h2"}, {200, kMax, "h3"}});
  CHECK(ranges_of(split_range(t, 199)) ==
        std::vector<IdRange>{{0, 99, "h1"}, {100, 198, "h2"}, {199, 199, "h2"}, {200, kMax, "h3"}});
  CHECK(ranges_of(split_range(t, 1)) ==
        std::vector<IdRange>{{0, 0, "h1"}, {1, 99, "h1"}, {100, 199, "h2"}, {200, kMax, "h3"}});
  CHECK(ranges_of(split_range(t, kMax)) ==
        std::vector<IdRange>{
            {0, 99, "h1"}, {100, 199, "h2"}, {200, kMax - 1, "h3"}, {kMax, kMax, "h3"}});
  for (uint64_t at : {uint64_t{0}, uint64_t{100}, uint64_t{200}}) {
    TableResult r = split_range(t, at);
    CHECK_FALSE(r.ok());
    CHECK(contains(r.error, "cannot split at " + std::to_string(at)));
    CHECK(contains(r.error, "already starts there"));
  }
  CHECK(contains(split_range(modulo_table(1), 5).error, "not range mode"));
}

TEST_CASE("routing_table: merge_ranges") {
  Table t = range_table();
  t.ranges = {{0, 49, "h1"}, {50, 99, "h1"}, {100, 149, "h1"}, {150, 199, "h2"}, {200, kMax, "h3"}};

  CHECK(ranges_of(merge_ranges(t, 0, 149)) ==
        std::vector<IdRange>{{0, 149, "h1"}, {150, 199, "h2"}, {200, kMax, "h3"}});
  CHECK(ranges_of(merge_ranges(t, 50, 149)) ==
        std::vector<IdRange>{{0, 49, "h1"}, {50, 149, "h1"}, {150, 199, "h2"}, {200, kMax, "h3"}});
  CHECK(ranges_of(merge_ranges(t, 0, 190)) ==  // [lo, hi] may reach past the ranges merged
        std::vector<IdRange>{{0, 149, "h1"}, {150, 199, "h2"}, {200, kMax, "h3"}});
  Table tail = range_table();
  tail.ranges = {{0, 99, "h1"}, {100, kMax - 1, "h3"}, {kMax, kMax, "h3"}};
  CHECK(ranges_of(merge_ranges(tail, 100, kMax)) ==
        std::vector<IdRange>{{0, 99, "h1"}, {100, kMax, "h3"}});
  Table whole = range_table();
  whole.ranges = {{0, kHalf, "h2"}, {kHalf + 1, kMax, "h2"}};
  CHECK(ranges_of(merge_ranges(whole, 0, kMax)) == std::vector<IdRange>{{0, kMax, "h2"}});

  // Only ranges wholly inside [lo, hi] count: here only [50, 99].
  TableResult r = merge_ranges(t, 10, 120);
  CHECK_FALSE(r.ok());
  CHECK(contains(r.error, "cannot merge 10-120: fewer than two ranges lie wholly inside it"));
  r = merge_ranges(t, 60, 70);
  CHECK(contains(r.error, "fewer than two ranges"));
  r = merge_ranges(t, 0, 199);
  CHECK_FALSE(r.ok());
  CHECK(contains(r.error,
                 "ranges[0] 0-49 (h1) and ranges[3] 150-199 (h2) belong to different servers"));
  r = merge_ranges(tail, 0, kMax);
  CHECK(contains(r.error, "belong to different servers"));
  r = merge_ranges(t, 9, 8);
  CHECK(contains(r.error, "ends before it starts"));
  CHECK(contains(merge_ranges(modulo_table(1), 0, kMax).error, "not range mode"));
}

TEST_CASE("routing_table: edits keep the table valid and never bump the version") {
  // A random walk of edits over a range table; every result must validate.
  Table t = range_table();
  uint64_t x = 12345;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int step = 0; step < 2000; ++step) {
    // Mostly small ids so that edits collide, sometimes anywhere.
    auto id = [&] { return next() % 4 == 0 ? next() : next() % 1000; };
    uint64_t a = id(), b = id();
    if (a > b) std::swap(a, b);
    TableResult r;
    switch (next() % 3) {
      case 0:
        r = assign_range(t, a, b, t.servers[next() % t.servers.size()].name);
        REQUIRE_MESSAGE(r.ok(), r.error);
        break;
      case 1:
        r = split_range(t, a);
        break;
      case 2:
        r = merge_ranges(t, a, b);
        break;
    }
    if (!r.ok()) continue;
    REQUIRE(validate(*r.table) == "");
    CHECK(r.table->version == t.version);
    t = std::move(*r.table);
  }
}

TEST_CASE("routing_table: set_mode") {
  Table t = modulo_table(4);
  TableResult r = set_mode(t, RoutingMode::kRange);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->ranges == even_ranges(t.servers));
  r = set_mode(*r.table, RoutingMode::kRing);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->mode == RoutingMode::kRing);
  CHECK(r.table->ranges.empty());
  // Switching to range mode keeps ranges a table already has (a no-op switch).
  Table range = range_table();
  CHECK(set_mode(range, RoutingMode::kRange).table == range);
  // Ring mode refuses weights it cannot honour.
  for (auto& s : t.servers) s.weight = 1000;
  r = set_mode(t, RoutingMode::kRing);
  CHECK(r.ok());  // 4000 <= 4096
  t.servers.push_back(server("hash5", 1, 1000));
  r = set_mode(t, RoutingMode::kRing);
  CHECK(contains(r.error, "cannot switch to ring mode: the servers' weights add up to 5000"));
}

TEST_CASE("routing_table: add_server and remove_server") {
  Table t = modulo_table(2);
  TableResult r = add_server(t, server("hash3", 2, 1, "127.0.0.1:7003"));
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->servers.back() == server("hash3", 2, 1, "127.0.0.1:7003"));
  CHECK(contains(add_server(t, server("hash1")).error, "a server of that name exists"));
  CHECK(contains(add_server(t, server("hash3", 0)).error,
                 "cannot add server \"hash3\": servers[2] (hash3) has 0 shards"));

  r = remove_server(*r.table, "hash1");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->servers ==
        std::vector<ServerInfo>{server("hash2"), server("hash3", 2, 1, "127.0.0.1:7003")});
  CHECK(contains(remove_server(t, "nope").error, "there is no server of that name"));
  CHECK(contains(remove_server(modulo_table(1), "hash1").error, "it is the last one"));

  SUBCASE("range mode: the removed server's ranges are spread over the survivors") {
    Table range = range_table();  // h1 [0, 99], h2 [100, 199], h3 [200, max]; h4 owns nothing
    r = remove_server(range, "h2");
    REQUIRE_MESSAGE(r.ok(), r.error);
    // Survivors h1, h3, h4 in table order: [100, 199] becomes thirds; the h1 and h3 thirds join
    // their neighbours.
    CHECK(r.table->ranges ==
          std::vector<IdRange>{
              {0, 132, "h1"}, {133, 165, "h3"}, {166, 199, "h4"}, {200, kMax, "h3"}});

    Table spread = range_table();
    spread.ranges = {{0, 99, "h2"}, {100, 101, "h1"}, {102, 102, "h2"}, {103, kMax, "h3"}};
    r = remove_server(spread, "h2");
    REQUIRE_MESSAGE(r.ok(), r.error);
    // [0, 99]: h1 h3 h4 from turn 0; [102, 102]: one id, to the survivor of turn 1 (h3).
    CHECK(r.table->ranges ==
          std::vector<IdRange>{
              {0, 32, "h1"}, {33, 65, "h3"}, {66, 99, "h4"}, {100, 101, "h1"}, {102, kMax, "h3"}});
    // Removing a server that owns nothing leaves the ranges alone.
    r = remove_server(range, "h4");
    REQUIRE_MESSAGE(r.ok(), r.error);
    CHECK(r.table->ranges == range.ranges);
    // The whole id space at once.
    Table all = range_table();
    all.ranges = {{0, kMax, "h4"}};
    r = remove_server(all, "h4");
    REQUIRE_MESSAGE(r.ok(), r.error);
    CHECK(r.table->ranges ==
          std::vector<IdRange>{{0, 6148914691236517204ULL, "h1"},
                               {6148914691236517205ULL, 12297829382473034409ULL, "h2"},
                               {12297829382473034410ULL, kMax, "h3"}});
  }
}

TEST_CASE("routing_table: set_replicas") {
  Table t = modulo_table(3);
  TableResult r = set_replicas(t, 2);
  REQUIRE_MESSAGE(r.ok(), r.error);
  Table want = t;
  want.replicas = 2;
  CHECK(*r.table == want);  // nothing else changes, and the version is the caller's to bump
  r = set_replicas(*r.table, 3);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->replicas == 3);
  r = set_replicas(*r.table, 1);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(*r.table == t);

  CHECK(set_replicas(t, 1).error ==
        "cannot set replicas 1: the table already keeps 1 copy of each record");
  CHECK(set_replicas(want, 2).error ==
        "cannot set replicas 2: the table already keeps 2 copies of each record");
  // Otherwise validate()'s sentence, after what was asked.
  for (const uint32_t n : {0u, 4u, 1000u}) {
    Table bad = t;
    bad.replicas = n;
    CAPTURE(n);
    CHECK(set_replicas(t, n).error ==
          "cannot set replicas " + std::to_string(n) + ": " + validate(bad));
    CHECK(contains(set_replicas(t, n).error, "1 to 3"));
  }
  Table two = modulo_table(2);
  Table three_copies = two;
  three_copies.replicas = 3;
  CHECK(set_replicas(two, 3).error == "cannot set replicas 3: " + validate(three_copies));
  CHECK(contains(set_replicas(two, 3).error, "only 2 servers"));

  // Every mode: the ranges and weights stay as they are.
  Table range = range_table();
  r = set_replicas(range, 3);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->ranges == range.ranges);
  Table ring = modulo_table(4);
  ring.mode = RoutingMode::kRing;
  ring.servers[1].weight = 5;
  r = set_replicas(ring, 2);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->servers == ring.servers);
}

TEST_CASE("routing_table: remove_server leaves a server for every copy") {
  Table t = modulo_table(3);
  t.replicas = 3;
  CHECK(remove_server(t, "hash2").error ==
        "cannot remove server \"hash2\": the table keeps 3 copies of each record and would have "
        "only 2 servers: lower replicas first (imctl replicas 2)");
  t.replicas = 2;
  TableResult r = remove_server(t, "hash2");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->replicas == 2);
  CHECK(r.table->servers.size() == 2);
  CHECK(remove_server(*r.table, "hash1").error ==
        "cannot remove server \"hash1\": the table keeps 2 copies of each record and would have "
        "only 1 server: lower replicas first (imctl replicas 1)");
  // The unknown name and the last server are said as before.
  CHECK(contains(remove_server(*r.table, "nope").error, "there is no server of that name"));
  // In range mode as well (the check comes before the ranges are handed over).
  Table range = range_table();
  range.replicas = 3;
  r = remove_server(range, "h4");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(contains(remove_server(*r.table, "h1").error, "lower replicas first (imctl replicas 2)"));
  CHECK(replicas_exceed_servers(3, 1) ==
        "the table keeps 3 copies of each record and would have only 1 server: lower replicas "
        "first (imctl replicas 1)");
}

TEST_CASE("routing_table: replicas in JSON") {
  Table modulo = modulo_table(3);
  modulo.replicas = 2;
  Table ring = modulo_table(4);
  ring.mode = RoutingMode::kRing;
  ring.replicas = 3;
  Table range = range_table();
  range.replicas = 2;
  for (const Table& t : {modulo, ring, range}) {
    REQUIRE(validate(t).empty());
    const std::string json = table_to_json(t);
    CAPTURE(json);
    CHECK(contains(json, "\"replicas\": " + std::to_string(t.replicas) + ",\n"));
    TableResult back = parse_table_json(json);
    REQUIRE_MESSAGE(back.ok(), back.error);
    CHECK(back.table->replicas == t.replicas);
    CHECK(*back.table == t);
    CHECK(table_to_json(*back.table) == json);
  }
  // One copy is the default: not written, and a table without the key keeps one.
  CHECK_FALSE(contains(table_to_json(modulo_table(3)), "replicas"));
  TableResult r = parse_table_json(
      R"({"version": 1, "mode": "modulo", "servers": [{"name": "a"}, {"name": "b"}]})");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->replicas == 1);
  r = parse_table_json(R"({"version": 1, "mode": "modulo", "replicas": 1,
                           "servers": [{"name": "a"}, {"name": "b"}]})");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.table->replicas == 1);

  // A table file with more copies than servers, or out of bounds, is refused with validate()'s
  // sentence.
  Table bad = modulo_table(2);
  bad.replicas = 3;
  check_invalid(bad, {"3 copies", "only 2 servers"});
  bad.replicas = 4;
  check_invalid(bad, {"replicas 4", "1 to 3"});
  bad.replicas = 0;
  check_invalid(bad, {"replicas 0", "1 to 3"});
  check_parse_error(
      R"({"version": 1, "mode": "modulo", "replicas": "2", "servers": [{"name": "a"}]})",
      {"replicas", "integer"});
  check_parse_error(
      R"({"version": 1, "mode": "modulo", "replicas": -1, "servers": [{"name": "a"}]})",
      {"replicas", "integer"});
}

TEST_CASE("routing_table: names of modes and hashes") {
  for (RoutingMode m : {RoutingMode::kModulo, RoutingMode::kRange, RoutingMode::kRing}) {
    CHECK(parse_mode(to_string(m)) == m);
  }
  CHECK(std::string(to_string(RoutingMode::kRing)) == "ring");
  CHECK(parse_mode("Ring") == std::nullopt);
  CHECK(parse_mode("") == std::nullopt);
  CHECK(parse_modulo_hash("identity") == ModuloHash::kIdentity);
  CHECK(parse_modulo_hash(to_string(ModuloHash::kMix)) == ModuloHash::kMix);
  CHECK(parse_modulo_hash("id") == std::nullopt);
}

TEST_CASE("routing_table: parse_id_range and format_id_range") {
  using P = std::pair<uint64_t, uint64_t>;
  CHECK(parse_id_range("1-2000") == P{1, 2000});
  CHECK(parse_id_range("7") == P{7, 7});
  CHECK(parse_id_range("0-18446744073709551615") == P{0, kMax});
  CHECK(parse_id_range(format_id_range(5, kHalf)) == P{5, kHalf});
  CHECK(format_id_range(1, 2000) == "1-2000");
  for (const char* bad : {"", "-", "1-", "-5", "5-4", "a-b", "1-2-3", " 1-2", "1 -2",
                          "18446744073709551616", "0x10", "+1-2"}) {
    CAPTURE(bad);
    CHECK(parse_id_range(bad) == std::nullopt);
  }
}

}  // namespace imhash
