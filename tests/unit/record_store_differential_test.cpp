// The record store against a std::unordered_map oracle (tests/store_model.h) over long random
// sequences of inserts, upserts, erases, lookups and scans that erase, through every size class,
// splits and shrinks, with both address families, and inserts in hash order (a streaming move's
// receiver: bursts that jump segments to the top class and the tidying of what they leave).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "tests/store_model.h"

using namespace imhash;
using imhash::testing::store_ep4;
using imhash::testing::store_ep6;
using imhash::testing::store_id_with_hash;
using imhash::testing::StoreModel;
using store_detail::kSizeClasses;

namespace {

struct Driver {
  StoreModel m;
  std::mt19937_64 rng{20261201};
  std::set<size_t> classes_seen;
  std::string error;

  Endpoint endpoint(uint64_t i, unsigned v6_percent) {
    return rng() % 100 < v6_percent ? store_ep6(i) : store_ep4(i);
  }
  void note(const std::string& e) {
    if (error.empty() && !e.empty()) error = e;
  }
  void sample_classes() {
    const auto shape = m.store().shape();
    for (size_t c = 0; c < shape.segments_per_class.size(); ++c) {
      if (shape.segments_per_class[c] > 0) classes_seen.insert(c);
    }
  }
  // One random operation on ids below `id_space`; `insert_bias` of 100 weights inserts against
  // erases evenly.
  void random_op(uint64_t id_space, unsigned insert_bias, unsigned v6_percent, uint32_t t) {
    const uint64_t id = rng() % 16 == 0 ? rng() : rng() % id_space;  // a few ids anywhere
    const unsigned op = static_cast<unsigned>(rng() % 200);
    if (op < insert_bias) {
      note(m.upsert(id, endpoint(id + t, v6_percent), t));
    } else if (op < insert_bias + 10) {
      note(m.insert_if_absent(id, endpoint(id, v6_percent), t));
    } else if (op < 170) {
      note(m.erase(id));
    } else if (op < 195) {
      note(m.get(id));
    } else {
      note(m.scan_step(1 + rng() % 300, [k = rng() % 7](uint64_t x) { return x % 7 == k; }));
    }
  }
};

}  // namespace

TEST_CASE("record_store differential: churn in a small id space, scans interleaved") {
  Driver d;
  for (uint32_t step = 0; step < 300000 && d.error.empty(); ++step) {
    d.random_op(6000, 110, 25, step);
    if (step % 20000 == 0) d.note(d.m.check_all());
  }
  d.note(d.m.check_all());
  CHECK(d.error == "");
}

TEST_CASE("record_store differential: growth through every class and splits, then shrinks") {
  Driver d;
  uint32_t t = 0;
  // Grow to 90k records (mostly inserts), sampling the classes after every operation while the
  // store is young, so that the first segment's passage through each class is seen.
  while (d.m.size() < 90000 && d.error.empty()) {
    d.random_op(1'000'000, 165, 30, ++t);
    if (d.m.size() < 9000 || t % 128 == 0) d.sample_classes();
    if (t % 30000 == 0) d.note(d.m.check_all());
  }
  d.note(d.m.check_all());
  const auto grown = d.m.store().shape();
  CHECK(grown.segments >= 16);  // split at least four times over
  for (size_t c = 0; c <= kSizeClasses.top; ++c) CHECK_MESSAGE(d.classes_seen.count(c), c);

  // Shrink: erase the records in a random order, with random operations in between, down to 3k;
  // the segments fall back into small classes.
  d.classes_seen.clear();
  std::vector<uint64_t> ids;
  for (const auto& [id, r] : d.m.records()) ids.push_back(id);
  std::shuffle(ids.begin(), ids.end(), d.rng);
  for (size_t i = 0; d.m.size() > 3000 && i < ids.size() && d.error.empty(); ++i) {
    d.note(d.m.erase(ids[i]));
    if (i % 4 == 0) d.random_op(1'000'000, 20, 30, ++t);
    if (i % 128 == 0) d.sample_classes();
    if (i % 40000 == 0) d.note(d.m.check_all());
  }
  d.note(d.m.check_all());
  CHECK(d.error == "");
  CHECK(d.m.store().capacity() < d.m.size() * 3);
  CHECK(*d.classes_seen.begin() < kSizeClasses.top / 2);

  // Grow again: shrunk segments grow back, and a full scan with erase in the middle of it.
  while (d.m.size() < 40000 && d.error.empty()) d.random_op(1'000'000, 170, 30, ++t);
  d.note(d.m.scan_all(997, [](uint64_t id) { return id % 2 == 0; }));
  d.note(d.m.check_all());
  CHECK(d.error == "");
}

TEST_CASE("record_store differential: scans never skip a record, whatever runs between steps") {
  // Each scan erases a share of the ids; between its steps random inserts (which grow, rehash and
  // split segments, including the one under the cursor), upserts of existing ids and erases
  // (which must not move a record from ahead of the cursor to behind it) run. The model fails
  // the scan if any record present throughout was never visited.
  Driver d;
  uint32_t t = 0;
  for (uint64_t id = 0; id < 20000; ++id) d.note(d.m.upsert(id * 3, store_ep4(id), 1));
  for (int scan = 0; scan < 12 && d.error.empty(); ++scan) {
    const uint64_t k = static_cast<uint64_t>(scan);
    d.m.scan_start();
    while (d.m.scanning() && d.error.empty()) {
      d.note(d.m.scan_step(1 + d.rng() % 2000, [k](uint64_t id) { return id % 5 == k % 5; }));
      const unsigned between = static_cast<unsigned>(d.rng() % 40);
      const unsigned bias = scan % 3 == 0 ? 170 : 100;  // some scans run while the store grows
      for (unsigned i = 0; i < between && d.error.empty(); ++i) {
        d.random_op(200000, bias, 20, ++t);
      }
    }
    d.note(d.m.check_all());
  }
  CHECK(d.error == "");
}

TEST_CASE("record_store differential: two interleaved sweeps in hash order, with random ops") {
  // What a receiving shard sees when two source shards stream to it: two sequences, each in
  // hash order, interleaved unevenly, with the live load's operations (and a purge's scans)
  // between. A third of each sweep's ids were stored before it started.
  Driver d;
  std::vector<uint64_t> sweep[2];
  const uint64_t step = UINT64_MAX / 60000;
  for (uint64_t i = 0; i < 60000; ++i) {
    for (uint64_t k = 0; k < 2; ++k)
      sweep[k].push_back(store_id_with_hash(i * step + k * step / 2));
  }
  uint32_t t = 0;
  for (const auto& ids : sweep) {
    for (size_t i = 0; i < ids.size(); i += 3) d.note(d.m.upsert(ids[i], store_ep4(ids[i]), 1));
  }
  size_t next[2] = {0, 0};
  while ((next[0] < sweep[0].size() || next[1] < sweep[1].size()) && d.error.empty()) {
    const int k =
        next[1] >= sweep[1].size() || (next[0] < sweep[0].size() && d.rng() % 3 != 0) ? 0 : 1;
    const uint64_t id = sweep[k][next[k]++];
    d.note(d.m.upsert(id, d.endpoint(id, 10), 2));
    if (d.rng() % 8 == 0) d.random_op(1'000'000, 100, 20, ++t);
    if ((next[0] + next[1]) % 40000 == 0) d.note(d.m.check_all());
  }
  d.note(d.m.check_all());
  CHECK(d.error == "");
  MESSAGE("records " << d.m.size() << ", segments " << d.m.store().shape().segments);
}
