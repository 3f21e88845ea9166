// Tests of the compiled routers: golden owners for every mode (login and hash servers must agree on
// them forever), the modulo identity mode, range lookups, and the ring's balance and movement.
#include "common/routing/router.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/routing/shard_map.h"
#include "common/routing/table_text.h"
#include "config_server/table_edits.h"
#include "tests/sample_tables.h"

namespace imhash {
namespace {

using test::kHalf;
using test::kMax;

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
    big.servers.push_back({std::string("s").append(std::to_string(i)), "", 1, 1});
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

TEST_CASE("router: server set --address moves no id in any mode, --weight moves ids in ring mode") {
  for (RoutingMode mode : {RoutingMode::kModulo, RoutingMode::kRange, RoutingMode::kRing}) {
    CAPTURE(to_string(mode));
    Table before = make_table(4, mode);
    if (mode == RoutingMode::kRange) before.ranges = even_ranges(before.servers);
    const TableResult after = set_server(before, "hash2", std::string("10.0.0.12:7001"), {});
    REQUIRE_MESSAGE(after.ok(), after.error);
    // Only that entry changed, in place.
    CHECK(after.table->servers[1].address == "10.0.0.12:7001");
    CHECK(after.table->servers[1].name == "hash2");
    CHECK(after.table->servers[1].shards == before.servers[1].shards);
    CHECK(after.table->ranges == before.ranges);
    for (size_t i = 0; i < before.servers.size(); ++i) {
      if (i != 1) CHECK(after.table->servers[i] == before.servers[i]);
    }
    // The id -> (server, shard) mapping is the same id for id.
    const auto a = Router::compile(before);
    const auto b = Router::compile(*after.table);
    for (uint64_t id = 0; id < 100000; ++id) {
      if (a->route(id) != b->route(id)) FAIL_CHECK("id " << id << " moved");
    }
    for (uint64_t id : kGoldenIds) CHECK(a->route(id) == b->route(id));
    // ... and ids of hash2 are now sent to its new address.
    for (uint64_t id = 0; id < 1000; ++id) {
      if (b->owner_info(id).name == "hash2") CHECK(b->owner_info(id).address == "10.0.0.12:7001");
    }
  }
  const Table ring = make_table(4, RoutingMode::kRing);
  const TableResult heavier = set_server(ring, "hash2", std::nullopt, 3u);
  REQUIRE_MESSAGE(heavier.ok(), heavier.error);
  CHECK(heavier.table->servers[1].weight == 3);
  CHECK(moved_fraction(ring, *heavier.table, 100000) > 0);
  CHECK(set_server(ring, "nope", std::string("a:1"), {}).error ==
        "cannot change server \"nope\": there is no server of that name");
  CHECK(set_server(ring, "hash1", std::nullopt, 1u).error ==
        "cannot change server \"hash1\": it already has that address and weight");
  CHECK(set_server(ring, "hash1", std::nullopt, 0u).error.find("weight") != std::string::npos);
}

}  // namespace imhash

// ---- replicas -----------------------------------------------------------------------------------

namespace imhash {
namespace {

void check_golden_sets(const Table& table, const std::vector<std::vector<Route>>& expected) {
  auto router = Router::compile(table);
  REQUIRE(expected.size() == std::size(kGoldenIds));
  for (size_t i = 0; i < expected.size(); ++i) {
    const uint64_t id = kGoldenIds[i];
    CAPTURE(id);
    const ReplicaSet set = router->replica_set(id);
    REQUIRE(set.size == expected[i].size());
    for (uint32_t k = 0; k < set.size; ++k) {
      CAPTURE(k);
      CHECK(set.routes[k] == expected[i][k]);
      CHECK(router->holds(id, set.routes[k].server));
    }
    CHECK(set.routes[0] == router->route(id));  // the owner comes first
  }
}

}  // namespace

// Pinned like the owners above: login and hash servers must agree on every replica forever.
TEST_CASE("router: golden replica sets, modulo mode") {
  Table t = make_table(5, RoutingMode::kModulo);
  t.replicas = 3;
  check_golden_sets(t, {{{4, 4}, {0, 0}, {1, 1}},
                        {{3, 0}, {4, 0}, {0, 0}},
                        {{1, 0}, {2, 0}, {3, 0}},
                        {{4, 4}, {0, 0}, {1, 1}},
                        {{2, 2}, {3, 3}, {4, 4}},
                        {{4, 0}, {0, 0}, {1, 0}},
                        {{0, 0}, {1, 0}, {2, 0}},
                        {{0, 0}, {1, 1}, {2, 2}},
                        {{4, 1}, {0, 0}, {1, 0}},
                        {{4, 2}, {0, 0}, {1, 0}},
                        {{3, 1}, {4, 2}, {0, 0}},
                        {{1, 0}, {2, 0}, {3, 0}}});
}

TEST_CASE("router: golden replica sets, range mode") {
  Table t = make_table(4, RoutingMode::kRange);
  t.replicas = 2;
  t.ranges = {{0, 999, "hash2"},
              {1000, kHalf - 1, "hash1"},
              {kHalf, kMax - 1, "hash3"},
              {kMax, kMax, "hash4"}};
  check_golden_sets(t, {{{1, 1}, {2, 2}},
                        {{1, 0}, {2, 0}},
                        {{1, 0}, {2, 0}},
                        {{1, 1}, {2, 2}},
                        {{1, 1}, {2, 2}},
                        {{0, 0}, {1, 0}},
                        {{0, 0}, {1, 0}},
                        {{0, 0}, {1, 1}},
                        {{0, 0}, {1, 0}},
                        {{2, 1}, {3, 1}},
                        {{2, 1}, {3, 1}},
                        {{3, 0}, {0, 0}}});
}

TEST_CASE("router: golden replica sets, ring mode") {
  Table t = make_table(10, RoutingMode::kRing);
  t.replicas = 3;
  check_golden_sets(t, {{{8, 8}, {6, 6}, {0, 0}},
                        {{2, 0}, {8, 0}, {9, 0}},
                        {{1, 0}, {7, 0}, {9, 1}},
                        {{4, 4}, {5, 5}, {2, 2}},
                        {{0, 0}, {4, 4}, {9, 9}},
                        {{8, 1}, {7, 1}, {5, 0}},
                        {{5, 0}, {1, 0}, {6, 0}},
                        {{6, 5}, {3, 3}, {9, 7}},
                        {{3, 1}, {5, 1}, {4, 1}},
                        {{6, 3}, {0, 0}, {5, 2}},
                        {{5, 2}, {0, 0}, {6, 3}},
                        {{4, 1}, {0, 0}, {8, 2}}});
}

TEST_CASE("router: a replica set has distinct servers and holds() agrees with it in every mode") {
  for (RoutingMode mode : kRoutingModes) {
    for (uint32_t replicas = 1; replicas <= kMaxReplicas; ++replicas) {
      Table t = make_table(4, mode);
      t.replicas = replicas;
      if (mode == RoutingMode::kRange) t.ranges = even_ranges(t.servers);
      auto router = Router::compile(t);
      CAPTURE(to_string(mode));
      CAPTURE(replicas);
      REQUIRE(router->replicas() == replicas);
      for (uint64_t id = 0; id < 2000; ++id) {
        const ReplicaSet set = router->replica_set(id * 0x9e3779b97f4a7c15ULL);
        REQUIRE(set.size == replicas);
        for (uint32_t server = 0; server < 4; ++server) {
          int seen = 0;
          for (uint32_t k = 0; k < set.size; ++k) seen += set.routes[k].server == server;
          CHECK(seen <= 1);
          CHECK(router->holds(id * 0x9e3779b97f4a7c15ULL, server) == (seen == 1));
        }
      }
    }
  }
}

TEST_CASE("router: ring replicas depend only on server names, and spread evenly") {
  Table a = make_table(6, RoutingMode::kRing);
  a.replicas = 2;
  Table b = a;
  std::reverse(b.servers.begin(), b.servers.end());
  for (auto& s : b.servers) s.address = "127.0.0.1:" + std::to_string(1000 + s.shards);
  auto ra = Router::compile(a);
  auto rb = Router::compile(b);
  std::map<std::string, int> replica_of;
  const int n = 60'000;
  for (uint64_t id = 0; id < n; ++id) {
    const ReplicaSet sa = ra->replica_set(id);
    const ReplicaSet sb = rb->replica_set(id);
    for (uint32_t k = 0; k < 2; ++k) {
      REQUIRE(a.servers[sa.routes[k].server].name == b.servers[sb.routes[k].server].name);
    }
    ++replica_of[a.servers[sa.routes[1].server].name];
  }
  // Each of 6 servers is the second copy of about 1/6 of the ids.
  for (const auto& entry : replica_of) {
    CAPTURE(entry.first);
    CHECK(entry.second > n / 6 * 8 / 10);
    CHECK(entry.second < n / 6 * 12 / 10);
  }
}

TEST_CASE("router: replicas are validated against the server count") {
  Table t = make_table(2, RoutingMode::kModulo);
  t.replicas = 3;
  CHECK(validate(t).find("only 2 servers") != std::string::npos);
  t.replicas = 0;
  CHECK(validate(t).find("replicas 0") != std::string::npos);
  t.replicas = 4;
  CHECK_FALSE(validate(t).empty());
  t.replicas = 2;
  CHECK(validate(t).empty());
}

}  // namespace imhash
