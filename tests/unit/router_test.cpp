// Tests of the compiled routers: golden owners for every mode (login and hash servers must agree on
// them forever), the modulo identity mode, range lookups, and the ring's balance and movement.
#include "common/router.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/shard_map.h"
#include "common/table_edits.h"

namespace imhash {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kHalf = uint64_t{1} << 63;

// Servers hash1..hashN; hashI has I shards so that the pinned routes exercise the shard map too.
Table make_table(int n, RoutingMode mode) {
  Table t;
  t.version = 1;
  t.mode = mode;
  for (int i = 1; i <= n; ++i) {
    t.servers.push_back({"hash" + std::to_string(i), "", static_cast<uint32_t>(i), 1});
  }
  return t;
}

const uint64_t kGoldenIds[] = {
    0, 1, 2, 3, 42, 1000, 123456789, uint64_t{1} << 32, kHalf - 1, kHalf, kMax - 1, kMax};

void check_golden(const Table& table, const std::vector<Route>& expected) {
  auto router = Router::compile(table);
  REQUIRE(expected.size() == std::size(kGoldenIds));
  for (size_t i = 0; i < expected.size(); ++i) {
    const uint64_t id = kGoldenIds[i];
    CAPTURE(id);
    CHECK(router->route(id) == expected[i]);
    CHECK(router->owner(id) == expected[i].server);
  }
}

// Owner names of ids 0..count-1, so routers over different server lists can be compared.
std::vector<std::string> owner_names(const Router& router, uint64_t count) {
  std::vector<std::string> names(count);
  for (uint64_t id = 0; id < count; ++id) names[id] = router.owner_info(id).name;
  return names;
}

double moved_fraction(const Table& before, const Table& after, uint64_t count) {
  auto a = owner_names(*Router::compile(before), count);
  auto b = owner_names(*Router::compile(after), count);
  uint64_t moved = 0;
  for (uint64_t id = 0; id < count; ++id) moved += a[id] != b[id];
  return static_cast<double>(moved) / static_cast<double>(count);
}

}  // namespace

// The pinned values below were computed once from the implementation; they must never change
// silently. A change here moves users between servers and breaks mixed-version clusters.
TEST_CASE("router: golden routes, modulo mode (mix)") {
  check_golden(make_table(5, RoutingMode::kModulo), {{4, 4},
                                                     {3, 0},
                                                     {1, 0},
                                                     {4, 4},
                                                     {2, 2},
                                                     {4, 0},
                                                     {0, 0},
                                                     {0, 0},
                                                     {4, 1},
                                                     {4, 2},
                                                     {3, 1},
                                                     {1, 0}});
}

TEST_CASE("router: golden routes, modulo mode (identity)") {
  Table t = make_table(5, RoutingMode::kModulo);
  t.modulo_hash = ModuloHash::kIdentity;
  check_golden(t, {{0, 0},
                   {1, 0},
                   {2, 0},
                   {3, 3},
                   {2, 2},
                   {0, 0},
                   {4, 0},
                   {1, 1},
                   {2, 0},
                   {3, 1},
                   {4, 2},
                   {0, 0}});
}

TEST_CASE("router: golden routes, range mode") {
  Table t = make_table(4, RoutingMode::kRange);
  t.ranges = {{0, 999, "hash2"},
              {1000, kHalf - 1, "hash1"},
              {kHalf, kMax - 1, "hash3"},
              {kMax, kMax, "hash4"}};
  check_golden(t, {{1, 1},
                   {1, 0},
                   {1, 0},
                   {1, 1},
                   {1, 1},
                   {0, 0},
                   {0, 0},
                   {0, 0},
                   {0, 0},
                   {2, 1},
                   {2, 1},
                   {3, 0}});
}

TEST_CASE("router: golden routes, ring mode") {
  check_golden(make_table(10, RoutingMode::kRing), {{8, 8},
                                                    {2, 0},
                                                    {1, 0},
                                                    {4, 4},
                                                    {0, 0},
                                                    {8, 1},
                                                    {5, 0},
                                                    {6, 5},
                                                    {3, 1},
                                                    {6, 3},
                                                    {5, 2},
                                                    {4, 1}});
}

TEST_CASE("router: golden routes, ring mode with weights") {
  Table t = make_table(4, RoutingMode::kRing);
  t.servers[0].weight = 3;
  t.servers[2].weight = 2;
  check_golden(t, {{2, 2},
                   {2, 0},
                   {1, 0},
                   {0, 0},
                   {0, 0},
                   {2, 0},
                   {2, 0},
                   {2, 2},
                   {3, 1},
                   {0, 0},
                   {0, 0},
                   {2, 0}});
}

TEST_CASE("router: route's shard is the shard map of the owner's shard count") {
  for (RoutingMode mode : {RoutingMode::kModulo, RoutingMode::kRange, RoutingMode::kRing}) {
    Table t = make_table(6, mode);
    if (mode == RoutingMode::kRange) t.ranges = even_ranges(t.servers);
    auto router = Router::compile(t);
    for (uint64_t id = 0; id < 10000; ++id) {
      const uint64_t x = id * 0x9e3779b97f4a7c15ULL;  // spread over the id space too
      for (uint64_t v : {id, x}) {
        const Route r = router->route(v);
        REQUIRE(r.server < t.servers.size());
        REQUIRE(r.shard == shard_of(v, t.servers[r.server].shards));
        REQUIRE(router->owns(v, t.servers[r.server].name));
        REQUIRE_FALSE(router->owns(v, t.servers[(r.server + 1) % 6].name));
      }
    }
    CHECK_FALSE(router->owns(0, "nobody"));
  }
}

TEST_CASE("router: modulo identity reproduces id mod N") {
  for (int n : {1, 2, 3, 7, 10, 64, 1000}) {
    Table t = make_table(n, RoutingMode::kModulo);
    t.modulo_hash = ModuloHash::kIdentity;
    auto router = Router::compile(t);
    const auto un = static_cast<uint64_t>(n);
    for (uint64_t id = 0; id < 5000; ++id) REQUIRE(router->owner(id) == id % un);
    for (uint64_t id = kMax; id > kMax - 5000; --id) REQUIRE(router->owner(id) == id % un);
    for (uint64_t id = 1; id != 0; id <<= 1) REQUIRE(router->owner(id) == id % un);
  }
}

TEST_CASE("router: modulo mix spreads consecutive ids evenly") {
  auto router = Router::compile(make_table(8, RoutingMode::kModulo));
  std::vector<uint64_t> load(8);
  for (uint64_t id = 0; id < 800000; ++id) ++load[router->owner(id)];
  for (uint64_t l : load) CHECK(l == doctest::Approx(100000).epsilon(0.02));
}

TEST_CASE("router: range mode finds the range at every boundary") {
  Table t = make_table(5, RoutingMode::kRange);
  t.ranges = {{0, 0, "hash3"},
              {1, 99, "hash1"},
              {100, 100, "hash2"},
              {101, kHalf, "hash1"},
              {kHalf + 1, kMax - 1, "hash5"},
              {kMax, kMax, "hash4"}};
  REQUIRE(validate(t) == "");
  auto router = Router::compile(t);
  auto expect = [&t](uint64_t id) {
    for (const IdRange& r : t.ranges) {
      if (r.lo <= id && id <= r.hi) return static_cast<uint32_t>(t.server_index(r.server));
    }
    return uint32_t{999};
  };
  for (const IdRange& r : t.ranges) {
    for (uint64_t id : {r.lo, r.hi, r.lo + (r.hi - r.lo) / 2}) {
      CAPTURE(id);
      CHECK(router->owner(id) == expect(id));
    }
  }
  CHECK(router->owner(0) == 2);
  CHECK(router->owner(100) == 1);
  CHECK(router->owner(kMax) == 3);
  // Servers that own no range are simply never chosen; many small ranges search correctly.
  Table many = make_table(3, RoutingMode::kRange);
  many.ranges.clear();
  for (uint64_t i = 0; i < 1000; ++i)
    many.ranges.push_back({i * 10, i * 10 + 9, i % 2 ? "hash1" : "hash3"});
  many.ranges.back().hi = kMax;
  REQUIRE(validate(many) == "");
  auto r2 = Router::compile(many);
  for (uint64_t id = 0; id < 10050; ++id) {
    REQUIRE(r2->owner(id) == (std::min<uint64_t>(id / 10, 999) % 2 ? 0u : 2u));
  }
}

TEST_CASE("router: ring balance over a million ids on 10 servers") {
  auto router = Router::compile(make_table(10, RoutingMode::kRing));
  const uint64_t count = 1000000;
  std::vector<uint64_t> load(10);
  for (uint64_t id = 0; id < count; ++id) ++load[router->owner(id)];
  const double mean = static_cast<double>(count) / 10;
  const double max_over_mean =
      static_cast<double>(*std::max_element(load.begin(), load.end())) / mean;
  const double min_over_mean =
      static_cast<double>(*std::min_element(load.begin(), load.end())) / mean;
  MESSAGE("ring, 10 servers, 1e6 ids: max/mean = " << max_over_mean
                                                   << ", min/mean = " << min_over_mean);
  CHECK(max_over_mean <= 1.05);
  CHECK(min_over_mean >= 0.95);
}

TEST_CASE("router: adding or removing a ring server moves about 1/N of the ids") {
  const uint64_t count = 1000000;
  const Table ten = make_table(10, RoutingMode::kRing);
  const Table eleven = make_table(11, RoutingMode::kRing);
  const double added = moved_fraction(ten, eleven, count);
  MESSAGE("ring, 10 -> 11 servers: moved " << added << " of the ids (ideal " << 1.0 / 11
                                           << ", bound " << 1.2 / 11 << ")");
  CHECK(added <= 1.2 / 11);
  CHECK(added >= 1.0 / 11 * 0.95);  // the new server does get its share

  // Removing hash4 of 11: its ids move, and few others.
  Table without = eleven;
  without.servers.erase(without.servers.begin() + 3);
  const double removed = moved_fraction(eleven, without, count);
  MESSAGE("ring, 11 -> 10 servers: moved " << removed << " of the ids");
  CHECK(removed <= 1.2 / 11);
}

TEST_CASE("router: the ring depends only on server names and weights") {
  Table a = make_table(7, RoutingMode::kRing);
  Table b = a;
  std::reverse(b.servers.begin(), b.servers.end());
  for (size_t i = 0; i < b.servers.size(); ++i) {
    b.servers[i].address = "10.1.1.1:" + std::to_string(7000 + i);
    b.servers[i].shards = 3;
  }
  b.servers[0].address = "10.1.1.2:1";
  b.version = 99;
  CHECK(moved_fraction(a, b, 200000) == 0.0);
  // A different name is a different server.
  Table c = a;
  c.servers[2].name = "hash3b";
  CHECK(moved_fraction(a, c, 200000) > 0.0);
}

TEST_CASE("router: a ring server of weight 2 gets twice the share") {
  Table t = make_table(5, RoutingMode::kRing);
  t.servers[1].weight = 2;
  auto router = Router::compile(t);
  const uint64_t count = 1200000;
  std::vector<uint64_t> load(5);
  for (uint64_t id = 0; id < count; ++id) ++load[router->owner(id)];
  const double unit = static_cast<double>(count) / 6;  // total weight 6
  const double ratio = static_cast<double>(load[1]) / (2 * unit);
  MESSAGE("ring, weight 2 among weight 1s: share / expected = " << ratio);
  CHECK(ratio == doctest::Approx(1.0).epsilon(0.10));
  for (size_t i : {0u, 2u, 3u, 4u}) {
    CHECK(static_cast<double>(load[i]) / unit == doctest::Approx(1.0).epsilon(0.10));
  }
}

TEST_CASE("router: ring edge cases") {
  // One server owns everything.
  auto one = Router::compile(make_table(1, RoutingMode::kRing));
  for (uint64_t id : kGoldenIds) CHECK(one->owner(id) == 0);
  // The largest table still gives every server a share of the slots.
  Table big;
  big.mode = RoutingMode::kRing;
  for (uint32_t i = 0; i < kMaxServers; ++i)
    big.servers.push_back({"s" + std::to_string(i), "", 1, 1});
  big.servers[0].weight = big.servers[1].weight = big.servers[2].weight = kMaxWeight;  // total 4021
  REQUIRE(validate(big) == "");
  auto router = Router::compile(big);
  std::vector<uint64_t> load(kMaxServers);
  for (uint64_t id = 0; id < 400000; ++id) ++load[router->owner(id)];
  CHECK(*std::min_element(load.begin(), load.end()) > 0);
  CHECK(static_cast<double>(load[0]) / 400000 == doctest::Approx(1000.0 / 4021).epsilon(0.02));
}

TEST_CASE("router: compile keeps the table and refuses an invalid one") {
  Table t = make_table(3, RoutingMode::kModulo);
  t.version = 17;
  auto router = Router::compile(t);
  CHECK(router->version() == 17);
  CHECK(router->mode() == RoutingMode::kModulo);
  CHECK(router->table() == t);
  CHECK(&router->owner_info(5) == &router->table().servers[router->owner(5)]);

  Table bad = make_table(2, RoutingMode::kRange);  // range mode without ranges
  CHECK_THROWS_AS(Router::compile(bad), std::invalid_argument);
  CHECK_THROWS_WITH(Router::compile(Table{}), doctest::Contains("no servers"));
}

}  // namespace imhash
