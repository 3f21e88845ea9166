#include "hash_server/record_store.h"

#include <doctest/doctest.h>

#include <random>
#include <unordered_map>

using namespace imhash;

namespace {
Endpoint ep4(uint32_t i) { return Endpoint::v4(0x0a000000 + i, static_cast<uint16_t>(i)); }
Endpoint ep6(uint32_t i) {
  std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};
  a[12] = static_cast<uint8_t>(i >> 24);
  a[13] = static_cast<uint8_t>(i >> 16);
  a[14] = static_cast<uint8_t>(i >> 8);
  a[15] = static_cast<uint8_t>(i);
  return Endpoint::v6(a, static_cast<uint16_t>(i));
}
}  // namespace

TEST_CASE("record_store: upsert, get, replace, erase") {
  RecordStore s;
  RecordStore::Record r;
  CHECK_FALSE(s.get(1, r));
  CHECK(s.upsert(1, ep4(1), 100));
  CHECK(s.upsert(0, ep6(7), 5));  // id 0 is a valid id
  REQUIRE(s.get(1, r));
  CHECK(r.endpoint == ep4(1));
  CHECK(r.last_seen == 100);
  REQUIRE(s.get(0, r));
  CHECK(r.endpoint == ep6(7));
  CHECK_FALSE(s.upsert(1, ep6(2), 200));  // replace, switching family
  REQUIRE(s.get(1, r));
  CHECK(r.endpoint == ep6(2));
  CHECK(s.size() == 2);
  CHECK(s.erase(1));
  CHECK_FALSE(s.erase(1));
  CHECK_FALSE(s.get(1, r));
  CHECK(s.size() == 1);
  CHECK_FALSE(s.insert_if_absent(0, ep4(9), 1));
  REQUIRE(s.get(0, r));
  CHECK(r.endpoint == ep6(7));
  CHECK(s.insert_if_absent(5, ep4(9), 1));
}

TEST_CASE("record_store: agrees with std::unordered_map under random churn and growth") {
  RecordStore s(16);
  std::unordered_map<uint64_t, RecordStore::Record> model;
  std::mt19937_64 rng(42);
  for (int step = 0; step < 200000; ++step) {
    // Small id space so inserts, replaces and erases all hit; a few huge ids too.
    const uint64_t id = (rng() % 8 == 0) ? rng() : rng() % 5000;
    const auto op = rng() % 10;
    if (op < 6) {
      const Endpoint e = (rng() % 4 == 0) ? ep6(static_cast<uint32_t>(step)) : ep4(step);
      const bool fresh = s.upsert(id, e, static_cast<uint32_t>(step));
      CHECK(fresh == (model.count(id) == 0));
      model[id] = {e, static_cast<uint32_t>(step)};
    } else if (op < 9) {
      CHECK(s.erase(id) == (model.erase(id) == 1));
    } else {
      RecordStore::Record r;
      const bool found = s.get(id, r);
      REQUIRE(found == (model.count(id) == 1));
      if (found) {
        CHECK(r.endpoint == model[id].endpoint);
        CHECK(r.last_seen == model[id].last_seen);
      }
    }
  }
  CHECK(s.size() == model.size());
  for (const auto& [id, rec] : model) {
    RecordStore::Record r;
    REQUIRE(s.get(id, r));
    CHECK(r.endpoint == rec.endpoint);
  }
}

TEST_CASE("record_store: a table past 2 MiB (huge-page backed) keeps every record through growth") {
  RecordStore s(16);
  constexpr uint64_t kCount = 200000;  // 512k slots of 24 bytes after growth
  size_t fresh = 0, erased = 0, wrong = 0;
  for (uint64_t id = 0; id < kCount; ++id) {
    s.prefetch(id * 7919);  // a hint only: never changes what the table holds
    fresh += s.upsert(id * 7919, ep4(static_cast<uint32_t>(id)), static_cast<uint32_t>(id));
  }
  CHECK(fresh == kCount);
  CHECK(s.capacity() * 24 > (size_t{2} << 20));
  for (uint64_t id = 0; id < kCount; id += 2) erased += s.erase(id * 7919);
  CHECK(erased == kCount / 2);
  CHECK(s.size() == kCount / 2);
  for (uint64_t id = 0; id < kCount; ++id) {
    RecordStore::Record r;
    s.prefetch(id * 7919);
    const bool found = s.get(id * 7919, r);
    wrong += found != (id % 2 == 1) || (found && !(r.endpoint == ep4(static_cast<uint32_t>(id))));
  }
  CHECK(wrong == 0);
}

TEST_CASE("record_store: IPv6 addresses are reused after erase") {
  RecordStore s;
  auto churn = [&s](uint64_t base) {
    for (uint32_t i = 0; i < 1000; ++i) s.upsert(base + i, ep6(i), 0);
    for (uint32_t i = 0; i < 1000; ++i) s.erase(base + i);
  };
  churn(0);
  const size_t mem = s.memory_bytes();
  for (uint64_t round = 1; round < 10; ++round) churn(round * 10000);
  CHECK(s.memory_bytes() == mem);
}

TEST_CASE("record_store: scan_erase deletes exactly the doomed records, even across shifts") {
  RecordStore s(16);
  for (uint64_t id = 0; id < 3000; ++id) s.upsert(id, ep4(static_cast<uint32_t>(id)), 0);
  size_t cursor = 0, erased = 0;
  while (cursor < s.capacity()) {
    erased += s.scan_erase(cursor, 7,
                           [](uint64_t id, const RecordStore::Record&) { return id % 3 != 0; });
  }
  CHECK(erased == 2000);
  CHECK(s.size() == 1000);
  for (uint64_t id = 0; id < 3000; ++id) {
    RecordStore::Record r;
    CHECK(s.get(id, r) == (id % 3 == 0));
  }
}
