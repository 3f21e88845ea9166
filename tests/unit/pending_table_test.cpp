#include "common/routing/pending_table.h"

#include <doctest/doctest.h>

#include <set>

#include "common/links/backoff.h"

using namespace imhash;

TEST_CASE("pending_table: insert, find, erase, a stale correlation id never matches") {
  PendingTable<int> t(4);
  CHECK(t.capacity() == 4);
  const uint32_t a = t.insert(1, 100);
  const uint32_t b = t.insert(2, 200);
  CHECK(t.size() == 2);
  REQUIRE(t.find(a) != nullptr);
  CHECK(*t.find(a) == 1);
  t.erase(a);
  CHECK(t.find(a) == nullptr);
  // Reuse every slot many times: the old id stays dead.
  for (int i = 0; i < 1000; ++i) t.erase(t.insert(i, 300));
  CHECK(t.find(a) == nullptr);
  CHECK(*t.find(b) == 2);
}

TEST_CASE("pending_table: full at capacity, expire hands out the overdue oldest first") {
  PendingTable<int> t(4);
  for (int i = 0; i < 4; ++i) t.insert(i, 100 + i);
  CHECK(t.full());
  std::vector<int> expired;
  t.expire(101, [&](int v) { expired.push_back(v); });
  CHECK(expired == std::vector<int>{0, 1});
  CHECK(t.size() == 2);
  CHECK_FALSE(t.full());
  std::vector<int> drained;
  t.drain([&](int v) { drained.push_back(v); });
  CHECK(drained == std::vector<int>{2, 3});
  CHECK(t.size() == 0);
}

TEST_CASE("pending_table: out-of-order answers, a stuck oldest request bounds the table") {
  PendingTable<int> t(8);
  std::vector<uint32_t> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(t.insert(i, i));
  for (int i = 1; i < 8; ++i) t.erase(ids[i]);  // all but the oldest answered
  CHECK(t.size() == 1);
  // Slots are free, but the send-order ring still holds the answered ones behind the stuck one.
  std::set<uint32_t> fresh;
  while (!t.full()) fresh.insert(t.insert(99, 50));
  CHECK(t.size() < 8);
  std::vector<int> expired;
  t.expire(10, [&](int v) { expired.push_back(v); });
  CHECK(expired == std::vector<int>{0});
  CHECK_FALSE(t.full());
}

TEST_CASE("backoff: grows exponentially with jitter, capped, and resets") {
  Backoff b(std::chrono::milliseconds(10), std::chrono::milliseconds(1000), 1);
  int64_t prev_ceiling = 10;
  for (int i = 0; i < 12; ++i) {
    const auto d = b.next().count();
    const int64_t ceiling = std::min<int64_t>(1000, 10LL << i);
    CHECK(d >= ceiling / 2);
    CHECK(d <= ceiling);
    prev_ceiling = ceiling;
  }
  CHECK(prev_ceiling == 1000);
  b.reset();
  CHECK(b.next().count() <= 10);
}
