// Tests of a shard's outbound stream scan (hash_server/handoff.h): which records it cuts and for
// which (server, shard), how it sizes batches, and its rules for acknowledgements, restarts, lost
// links and cancellation; plus a differential check that no record present for the whole scan is
// left behind while requests change the store between steps.
#include "hash_server/handoff.h"

#include <doctest/doctest.h>

#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/routing/router.h"
#include "common/routing/shard_map.h"
#include "common/routing/table.h"
#include "tests/sample_endpoints.h"

using namespace imhash;
using frame::ImportRecord;
using imhash::test::record_endpoint;
constexpr size_t kBatchRecords = Handoff::kBatchRecords;  // a full batch
using State = Handoff::State;

namespace {

constexpr uint32_t kScanNow = 100000;

// hash1 (2 shards) owns 0..9999, hash2 (3 shards) 10000..19999, hash3 (1 shard) the rest.
std::shared_ptr<const Router> three_ranges(uint64_t version = 3) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRange;
  t.servers = {ServerInfo{"hash1", "10.0.0.1:7001", 2, 1},
               ServerInfo{"hash2", "10.0.0.2:7001", 3, 1},
               ServerInfo{"hash3", "10.0.0.3:7001", 1, 1}};
  t.ranges = {IdRange{0, 9999, "hash1"}, IdRange{10000, 19999, "hash2"},
              IdRange{20000, std::numeric_limits<uint64_t>::max(), "hash3"}};
  REQUIRE(validate(t) == "");
  return Router::compile(t);
}

std::shared_ptr<const Router> ring_of(int n, uint64_t version = 5) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRing;
  for (int i = 1; i <= n; ++i) {
    t.servers.push_back(ServerInfo{"hash" + std::to_string(i),
                                   "10.0.0." + std::to_string(i) + ":7001",
                                   static_cast<uint32_t>(i), 1});
  }
  REQUIRE(validate(t) == "");
  return Router::compile(t);
}

// The last_seen every test record of `id` gets (its endpoint: record_endpoint).
uint32_t last_seen_of(uint64_t id) { return kScanNow - static_cast<uint32_t>(id % 3600); }

RecordStore filled(uint64_t lo, uint64_t hi) {
  RecordStore s;
  for (uint64_t id = lo; id < hi; ++id) s.upsert(id, record_endpoint(id), last_seen_of(id));
  return s;
}

std::vector<ImportRecord> records_of(const Handoff::Batch& b) {
  std::vector<ImportRecord> v;
  std::string_view rest(reinterpret_cast<const char*>(b.records.data()), b.records.size());
  ImportRecord r;
  while (frame::next_import_record(rest, r)) v.push_back(r);
  CHECK(rest.empty());
  return v;
}

// What the batches of a scan held, checked batch by batch against the router that cut them.
struct Cuts {
  std::map<uint64_t, int> times;  // id -> how often it was cut
  std::vector<Handoff::Batch> batches;
  size_t full_batches = 0;
};

void check_batch(const Handoff::Batch& b, const Router& router, uint64_t generation, Cuts& cuts) {
  CHECK(b.generation == generation);
  // The receiver judges a batch by the table it was cut under.
  CHECK(b.version == router.version());
  REQUIRE(b.count > 0);
  CHECK(b.count <= kBatchRecords);
  cuts.full_batches += b.count == kBatchRecords;
  const auto records = records_of(b);
  REQUIRE(records.size() == b.count);
  for (const ImportRecord& r : records) {
    CAPTURE(r.id);
    const ServerInfo& owner = router.owner_info(r.id);
    CHECK(b.target == owner);
    CHECK(b.target_shard == shard_of(r.id, owner.shards));
    ++cuts.times[r.id];
  }
}

// Steps `h` until its scan ends, `max_slots` at a time; returns the batches it cut.
Cuts scan_to_end(Handoff& h, RecordStore& store, size_t max_slots, const Router& router) {
  Cuts cuts;
  uint64_t last_seq = 0;
  bool first = true;
  size_t steps = 0;
  while (h.scanning()) {
    REQUIRE(++steps < 1000000);
    std::vector<Handoff::Batch> out;
    h.step(store, max_slots, out);
    for (const auto& b : out) {
      check_batch(b, router, h.generation(), cuts);
      CHECK((first || b.seq > last_seq));
      first = false;
      last_seq = b.seq;
      cuts.batches.push_back(b);
    }
  }
  return cuts;
}

// Steps `h`, `max_slots` at a time, until it has cut at least `batches` batches.
std::vector<Handoff::Batch> step_until(Handoff& h, RecordStore& store, size_t max_slots,
                                       size_t batches) {
  std::vector<Handoff::Batch> out;
  while (out.size() < batches) {
    REQUIRE(h.scanning());
    h.step(store, max_slots, out);
  }
  return out;
}

// The stream sender's report that `b` was acknowledged.
void ack(Handoff& h, const Handoff::Batch& b, bool link_lost = false) {
  h.acknowledged(b.generation, b.count, b.target.name, link_lost);
}

void ack_all(Handoff& h, const std::vector<Handoff::Batch>& batches, bool link_lost = false) {
  for (const auto& b : batches) ack(h, b, link_lost);
}

// The usual set-up: hash1's store holding ids 0..29999, of which 20000 belong to hash2 and hash3.
struct ThreeRanges {
  RecordStore s = filled(0, 30000);
  std::shared_ptr<const Router> router = three_ranges();
  Handoff h;
};

}  // namespace

TEST_CASE_FIXTURE(
    ThreeRanges,
    "handoff: range mode cuts every record another server owns, for its owner's shard") {
  CHECK(h.progress().state == State::kIdle);
  h.start(router, router->table().server_index("hash1"), s, true);
  CHECK(h.running());
  CHECK(h.progress().version == 3);
  const Cuts cuts = scan_to_end(h, s, 500, *router);
  // Each of the 20000 records of hash2 and hash3 exactly once (nothing changed the store), none
  // of hash1's own.
  CHECK(cuts.times.size() == 20000);
  for (const auto& entry : cuts.times) {
    const uint64_t id = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    CAPTURE(id);
    CHECK(id >= 10000);
    CHECK(entry.second == 1);
  }
  CHECK(h.progress().cut == 20000);
  CHECK(h.progress().scanned == h.progress().total);
  CHECK(h.progress().in_flight == cuts.batches.size());
  // About 5000 records per target shard: several batches fill up to the limit.
  CHECK(cuts.full_batches >= 16);
  // Records carry the store's endpoint and the second they were last seen.
  for (const auto& b : cuts.batches) {
    for (const ImportRecord& r : records_of(b)) {
      CAPTURE(r.id);
      CHECK(r.endpoint == record_endpoint(r.id));
      CHECK(r.age_seconds == last_seen_of(r.id));  // the second last seen, not an age
    }
  }
  // Every (server, shard) of the other servers got records; hash1 got none.
  std::set<std::pair<std::string, uint16_t>> targets;
  for (const auto& b : cuts.batches) targets.emplace(b.target.name, b.target_shard);
  CHECK(targets == std::set<std::pair<std::string, uint16_t>>{
                       {"hash2", 0}, {"hash2", 1}, {"hash2", 2}, {"hash3", 0}});
}

TEST_CASE("handoff: ring mode cuts exactly the ids other servers own, for the right shard") {
  auto router = ring_of(4);
  for (int self = 0; self < 4; ++self) {
    CAPTURE(self);
    RecordStore s = filled(0, 20000);
    Handoff h;
    h.start(router, self, s, true);
    const Cuts cuts = scan_to_end(h, s, 777, *router);
    size_t others = 0;
    for (uint64_t id = 0; id < 20000; ++id) {
      const bool foreign = router->owner(id) != static_cast<uint32_t>(self);
      others += foreign;
      auto it = cuts.times.find(id);
      CAPTURE(id);
      CHECK((it == cuts.times.end() ? 0 : it->second) == (foreign ? 1 : 0));
    }
    CHECK(others > 10000);  // the ring spreads 20000 ids over four servers
    CHECK(h.progress().cut == others);
    ack_all(h, cuts.batches);
    CHECK(h.progress().state == State::kDone);
    CHECK(h.progress().acked == others);
  }
}

TEST_CASE("handoff: a batch carries each record's last-seen second, made ages for older peers") {
  RecordStore s;
  s.upsert(50000, Endpoint::v4(0x01020304, 9), kScanNow + 100);  // seen "after now": clocks apart
  s.upsert(50001, Endpoint::v4(0x01020305, 9), kScanNow - 7);
  auto router = three_ranges();
  Handoff h;
  h.start(router, 0, s, true);
  Cuts cuts = scan_to_end(h, s, 1000, *router);
  auto all_records = [&cuts] {
    std::map<uint64_t, ImportRecord> by_id;
    for (const auto& b : cuts.batches) {
      for (const ImportRecord& r : records_of(b)) by_id[r.id] = r;
    }
    return by_id;
  };
  auto records = all_records();
  REQUIRE(records.size() == 2);
  CHECK(records[50000] == ImportRecord{50000, kScanNow + 100, Endpoint::v4(0x01020304, 9)});
  CHECK(records[50001] == ImportRecord{50001, kScanNow - 7, Endpoint::v4(0x01020305, 9)});
  // For a receiver that does not understand kFlagTimed: ages at the time of sending.
  for (auto& b : cuts.batches) frame::import_records_to_ages(b.records, kScanNow);
  records = all_records();
  CHECK(records[50000] == ImportRecord{50000, 0, Endpoint::v4(0x01020304, 9)});
  CHECK(records[50001] == ImportRecord{50001, 7, Endpoint::v4(0x01020305, 9)});
}

TEST_CASE_FIXTURE(ThreeRanges, "handoff: running until every batch is acknowledged, then done") {
  h.start(router, 0, s, true);
  const Cuts cuts = scan_to_end(h, s, 4096, *router);
  REQUIRE(cuts.batches.size() > 2);
  CHECK_FALSE(h.scanning());
  std::vector<Handoff::Batch> none;
  CHECK(h.step(s, 4096, none) == 0);  // the scan is over: nothing more is cut
  CHECK(none.empty());
  std::map<std::string, uint64_t> per_target;
  for (size_t i = 0; i < cuts.batches.size(); ++i) {
    CHECK(h.running());
    CHECK(h.progress().in_flight == cuts.batches.size() - i);
    const auto& b = cuts.batches[i];
    ack(h, b);
    per_target[b.target.name] += b.count;
  }
  CHECK(h.progress().state == State::kDone);
  CHECK_FALSE(h.running());
  CHECK(h.progress().in_flight == 0);
  CHECK(h.progress().acked == 20000);
  CHECK(h.progress().restarts == 0);
  CHECK(per_target == std::map<std::string, uint64_t>{{"hash2", 10000}, {"hash3", 10000}});
  CHECK(std::map<std::string, uint64_t>(h.targets().begin(), h.targets().end()) == per_target);
  // A late duplicate acknowledgement changes nothing once done.
  const auto& last = cuts.batches.back();
  ack(h, last, true);
  CHECK(h.progress().state == State::kDone);
  CHECK(h.progress().acked == 20000);
}

TEST_CASE("handoff: a store with nothing to move is done when its scan ends") {
  auto router = three_ranges();
  RecordStore own = filled(0, 10000);  // hash1's ids only
  Handoff h;
  h.start(router, 0, own, true);
  const Cuts cuts = scan_to_end(h, own, 1000, *router);
  CHECK(cuts.batches.empty());
  CHECK(h.progress().state == State::kDone);

  RecordStore empty;
  h.start(router, 0, empty, true);
  CHECK(h.running());
  std::vector<Handoff::Batch> out;
  CHECK(h.step(empty, 1000, out) == 0);
  CHECK(out.empty());
  CHECK(h.progress().state == State::kDone);
}

TEST_CASE_FIXTURE(ThreeRanges, "handoff: acknowledgements of an older generation are ignored") {
  h.start(router, 0, s, true);
  const uint64_t first_generation = h.generation();
  const Cuts old_cuts = scan_to_end(h, s, 4096, *router);
  REQUIRE_FALSE(old_cuts.batches.empty());

  // A newer table restarts the scan: the batches cut under the old one no longer count.
  auto newer = three_ranges(4);
  h.start(newer, 0, s, false);
  CHECK(h.generation() > first_generation);
  CHECK(h.progress().version == 4);
  CHECK(h.progress().in_flight == 0);
  CHECK(h.scanning());
  ack_all(h, old_cuts.batches);
  CHECK(h.progress().acked == 0);
  CHECK(h.progress().in_flight == 0);
  CHECK(h.targets().empty());
  CHECK(h.scanning());

  const Cuts cuts = scan_to_end(h, s, 4096, *newer);
  ack_all(h, old_cuts.batches);  // still stale, even with nothing of this scan in flight
  CHECK(h.running());
  CHECK(h.progress().acked == 0);
  ack_all(h, cuts.batches);
  CHECK(h.progress().state == State::kDone);
  CHECK(h.progress().acked == 20000);
}

TEST_CASE_FIXTURE(
    ThreeRanges, "handoff: start with fresh=false while running counts a restart and keeps acked") {
  h.start(router, 0, s, true);
  // Part of the scan, and part of its batches acknowledged.
  const auto out = step_until(h, s, 2048, 3);
  ack(h, out[0]);
  ack(h, out[1]);
  const uint64_t acked = h.progress().acked;
  CHECK(acked == 2u * kBatchRecords);

  h.start(router, 0, s, false);
  CHECK(h.running());
  CHECK(h.scanning());
  CHECK(h.progress().restarts == 1);
  CHECK(h.progress().acked == acked);
  CHECK(h.progress().scanned == 0);
  CHECK(h.progress().in_flight == 0);
  CHECK_FALSE(h.targets().empty());
  // The batch of the first scan still on its way counts for nothing now.
  ack(h, out[2]);
  CHECK(h.progress().acked == acked);

  // The restarted scan cuts everything again, and finishes on its own acknowledgements.
  const Cuts cuts = scan_to_end(h, s, 2048, *router);
  CHECK(cuts.times.size() == 20000);
  ack_all(h, cuts.batches);
  CHECK(h.progress().state == State::kDone);
  CHECK(h.progress().acked == acked + 20000);
  CHECK(h.progress().restarts == 1);

  // Once done, a start is a new stream whatever `fresh` says: its counts begin at zero.
  h.start(router, 0, s, false);
  CHECK(h.running());
  CHECK(h.progress().restarts == 0);
  CHECK(h.progress().acked == 0);
  CHECK(h.targets().empty());

  // A fresh start while running begins a new stream too.
  scan_to_end(h, s, 100000, *router);
  h.start(router, 0, s, true);
  CHECK(h.progress().restarts == 0);
  CHECK(h.progress().acked == 0);
  CHECK(h.progress().in_flight == 0);
}

TEST_CASE("handoff: a lost link makes it scan once more before it can be done") {
  RecordStore s = filled(0, 30000);
  auto router = three_ranges();
  for (const bool lost_last : {false, true}) {
    CAPTURE(lost_last);
    Handoff h;
    h.start(router, 0, s, true);
    const uint64_t first_generation = h.generation();
    const Cuts cuts = scan_to_end(h, s, 4096, *router);
    REQUIRE(cuts.batches.size() > 2);
    // One batch (the first or the last to be acknowledged) came back over a link that broke.
    for (size_t i = 0; i < cuts.batches.size(); ++i) {
      const auto& b = cuts.batches[i];
      const bool lost = lost_last ? i + 1 == cuts.batches.size() : i == 0;
      ack(h, b, lost);
      if (i + 1 < cuts.batches.size()) {
        CHECK(h.running());
        CHECK_FALSE(h.scanning());  // the second scan waits until this one is acknowledged
      }
    }
    CHECK(h.running());
    CHECK(h.scanning());
    CHECK(h.progress().restarts == 1);
    CHECK(h.generation() > first_generation);
    CHECK(h.progress().acked == 20000);
    CHECK(h.progress().in_flight == 0);
    CHECK(h.progress().scanned == 0);

    const Cuts again = scan_to_end(h, s, 4096, *router);
    CHECK(again.times.size() == 20000);
    CHECK(h.running());
    ack_all(h, again.batches);
    CHECK(h.progress().state == State::kDone);
    CHECK(h.progress().restarts == 1);
    CHECK(h.progress().acked == 40000);
  }
}

TEST_CASE_FIXTURE(ThreeRanges,
                  "handoff: a lost link reported while the scan runs is honoured when it ends") {
  h.start(router, 0, s, true);
  const auto out = step_until(h, s, 1024, 1);
  REQUIRE(h.scanning());
  for (const auto& b : out) ack(h, b, true);
  CHECK(h.scanning());
  CHECK(h.progress().restarts == 0);
  Cuts rest = scan_to_end(h, s, 1024, *router);
  CHECK(h.running());
  ack_all(h, rest.batches);
  CHECK(h.scanning());
  CHECK(h.progress().restarts == 1);
  const Cuts again = scan_to_end(h, s, 1024, *router);
  ack_all(h, again.batches);
  CHECK(h.progress().state == State::kDone);
}

TEST_CASE_FIXTURE(
    ThreeRanges, "handoff: cancel stops the scan and ignores acknowledgements still on their way") {
  h.cancel();  // nothing running: nothing happens
  CHECK(h.progress().state == State::kIdle);
  h.start(router, 0, s, true);
  const auto out = step_until(h, s, 1024, 1);
  h.cancel();
  CHECK(h.progress().state == State::kCancelled);
  CHECK_FALSE(h.running());
  CHECK_FALSE(h.scanning());
  std::vector<Handoff::Batch> more;
  CHECK(h.step(s, 100000, more) == 0);
  CHECK(more.empty());
  const uint64_t acked = h.progress().acked;
  ack_all(h, out, true);
  CHECK(h.progress().state == State::kCancelled);
  CHECK(h.progress().acked == acked);
  // A new stream can start after a cancel.
  h.start(router, 0, s, false);
  CHECK(h.running());
  CHECK(h.progress().restarts == 0);
}

TEST_CASE("handoff: a server missing from the table cuts every record") {
  RecordStore s = filled(0, 30000);
  auto router = three_ranges();
  Handoff h;
  h.start(router, -1, s, true);
  const Cuts cuts = scan_to_end(h, s, 3000, *router);
  CHECK(cuts.times.size() == 30000);
  for (const auto& [id, n] : cuts.times) CHECK(n == 1);
  size_t to_hash1 = 0;
  for (const auto& b : cuts.batches) to_hash1 += b.target.name == "hash1" ? b.count : 0;
  CHECK(to_hash1 == 10000);
  ack_all(h, cuts.batches);
  CHECK(h.progress().state == State::kDone);
  CHECK(h.progress().acked == 30000);
}

TEST_CASE("handoff: without a table nothing moves and it is done at once") {
  RecordStore s = filled(0, 1000);
  Handoff h;
  h.start(nullptr, -1, s, true);
  CHECK(h.progress().state == State::kDone);
  CHECK_FALSE(h.scanning());
  CHECK(h.progress().version == 0);
  CHECK(h.router() == nullptr);
  std::vector<Handoff::Batch> out;
  CHECK(h.step(s, 100000, out) == 0);
  CHECK(out.empty());
  CHECK(h.progress().cut == 0);
}

TEST_CASE("handoff: records present for the whole scan are cut while requests change the store") {
  // Between steps the shard serves requests: inserts that grow, rehash and split segments (the
  // one under the cursor too) and deletes. Every record that stays from start to end must be cut
  // at least once, none of the server's own ids ever, and every batch for the right owner.
  std::mt19937_64 rng(13);
  for (int round = 0; round < 6; ++round) {
    CAPTURE(round);
    const bool ring = round % 2 == 1;
    auto router = ring ? ring_of(3) : three_ranges();
    const int self = ring ? round % 3 : 0;
    RecordStore s;
    std::set<uint64_t> stable, churn;
    for (uint64_t id = 0; id < 24000; ++id) {
      s.upsert(id, record_endpoint(id), last_seen_of(id));
      (id % 3 == 0 ? churn : stable).insert(id);
    }
    Handoff h;
    h.start(router, self, s, true);
    Cuts cuts;
    uint64_t next_new = 1000000;
    size_t steps = 0;
    while (h.scanning()) {
      REQUIRE(++steps < 100000);
      std::vector<Handoff::Batch> out;
      h.step(s, 1 + rng() % 700, out);
      for (auto& b : out) {
        check_batch(b, *router, h.generation(), cuts);
        cuts.batches.push_back(std::move(b));
      }
      for (int i = 0; i < 40; ++i) {
        const uint64_t dice = rng() % 4;
        if (dice == 0 && !churn.empty()) {
          auto it = churn.lower_bound(rng() % 24000);
          if (it == churn.end()) it = churn.begin();
          s.erase(*it);
          churn.erase(it);
        } else if (dice == 1) {
          // A login again of a churning id (perhaps deleted before), among the stable ones.
          const uint64_t id = rng() % 8000 * 3;
          s.upsert(id, record_endpoint(id), kScanNow);
          churn.insert(id);
        } else {
          const uint64_t id = next_new++;
          s.upsert(id, record_endpoint(id), kScanNow);
          churn.insert(id);
        }
      }
    }
    ack_all(h, cuts.batches);
    CHECK(h.progress().state == State::kDone);
    size_t missed = 0, expected = 0;
    for (uint64_t id : stable) {
      if (router->owner(id) == static_cast<uint32_t>(self)) continue;
      ++expected;
      missed += cuts.times.count(id) == 0;
    }
    CHECK(expected > 5000);
    CHECK(missed == 0);
    size_t own_cut = 0;
    for (const auto& [id, n] : cuts.times) {
      own_cut += router->owner(id) == static_cast<uint32_t>(self);
    }
    CHECK(own_cut == 0);
    CHECK(s.size() > 24000);  // the inserts grew the store while it was scanned
    CHECK(s.check() == "");
  }
}

// ---- replicas -----------------------------------------------------------------------------------

namespace {

std::shared_ptr<const Router> replicated_ring(int n, uint32_t replicas, uint64_t version) {
  Table t = ring_of(n, version)->table();
  t.replicas = replicas;
  REQUIRE(validate(t) == "");
  return Router::compile(t);
}

// id -> the (server, shard) pairs a scan cut it for.
using Targets = std::map<uint64_t, std::set<std::pair<std::string, uint16_t>>>;

Targets scan_targets(Handoff& h, RecordStore& store,
                     std::vector<Handoff::Batch>* batches = nullptr) {
  Targets targets;
  size_t steps = 0;
  while (h.scanning()) {
    REQUIRE(++steps < 1000000);
    std::vector<Handoff::Batch> out;
    h.step(store, 1000, out);
    for (const auto& b : out) {
      for (const ImportRecord& r : records_of(b))
        targets[r.id].emplace(b.target.name, b.target_shard);
      if (batches) batches->push_back(b);
    }
  }
  return targets;
}

// The members of id's set under `router` other than `self`, minus those every router of
// `held` had in the id's set (by name).
std::set<std::pair<std::string, uint16_t>> expected_targets(
    const Router& router, uint64_t id, const std::string& self,
    const std::vector<std::shared_ptr<const Router>>& held) {
  std::set<std::pair<std::string, uint16_t>> out;
  const ReplicaSet set = router.replica_set(id);
  for (uint32_t k = 0; k < set.size; ++k) {
    const ServerInfo& m = router.table().servers[set.routes[k].server];
    if (m.name == self) continue;
    bool throughout = !held.empty();
    for (const auto& h : held) {
      const int i = h->table().server_index(m.name);
      throughout = throughout && i >= 0 && h->holds(id, static_cast<uint32_t>(i));
    }
    if (!throughout) out.emplace(m.name, static_cast<uint16_t>(set.routes[k].shard));
  }
  return out;
}

void check_targets(const Targets& got, const Router& router, const std::string& self,
                   const std::vector<std::shared_ptr<const Router>>& held, uint64_t ids) {
  for (uint64_t id = 0; id < ids; ++id) {
    CAPTURE(id);
    const auto want = expected_targets(router, id, self, held);
    const auto it = got.find(id);
    if (want.empty()) {
      CHECK(it == got.end());
    } else {
      REQUIRE(it != got.end());
      CHECK(it->second == want);
    }
  }
}

}  // namespace

TEST_CASE("handoff: with replicas and no history every record goes to every other member") {
  auto router = replicated_ring(4, 2, 5);
  for (int self = 0; self < 4; ++self) {
    CAPTURE(self);
    RecordStore s = filled(0, 6000);
    Handoff h;
    h.start(router, self, s, true);
    const Targets got = scan_targets(h, s);
    check_targets(got, *router, router->table().servers[self].name, {}, 6000);
  }
}

TEST_CASE("handoff: with replicas a member that held an id under every table since is skipped") {
  auto four = replicated_ring(4, 2, 5);
  auto five = [] {
    Table t = replicated_ring(4, 2, 6)->table();
    t.servers.push_back(ServerInfo{"hash5", "10.0.0.5:7001", 2, 1});
    return Router::compile(t);
  }();
  RecordStore s = filled(0, 6000);
  SUBCASE("the same table: nothing moves") {
    Handoff h;
    h.start(four, 0, s, true, {four});
    CHECK(scan_targets(h, s).empty());
    CHECK(h.progress().state == State::kDone);
  }
  SUBCASE("a server joins: only the members new to an id") {
    Handoff h;
    h.start(five, 0, s, true, {four, five});
    const Targets got = scan_targets(h, s);
    check_targets(got, *five, "hash1", {four}, 6000);
    CHECK(got.size() > 300);  // hash5 joins about a third of the sets of 2 of 5
    CHECK(got.size() < 6000 / 2);
  }
  SUBCASE("a member out of the set under a table in between is sent it again") {
    auto four_again = [] {
      Table t = replicated_ring(4, 2, 7)->table();
      return Router::compile(t);
    }();
    Handoff h;
    h.start(four_again, 0, s, true, {four, five, four_again});
    const Targets got = scan_targets(h, s);
    check_targets(got, *four_again, "hash1", {four, five}, 6000);
    CHECK_FALSE(got.empty());
  }
}

TEST_CASE("handoff: a copy of an id the server held under no table since its last stream stays") {
  // A nemesis run (seed 103): the copies went from 3 to 2 and, before the purge of the dropped
  // copies ran, a drain moved ids; each server streamed every record whose id moved, its dropped
  // copies too, and the drain's new owners took copies from before 26 LOGOUTs.
  auto three = replicated_ring(4, 3, 5);
  auto two = replicated_ring(4, 2, 6);
  auto moved = [] {  // hash4 drained: out of the table
    Table t = replicated_ring(4, 2, 7)->table();
    t.servers.pop_back();
    return Router::compile(t);
  }();
  RecordStore s = filled(0, 6000);
  for (const int self : {0, 1, 2}) {
    CAPTURE(self);
    const std::string name = two->table().servers[static_cast<size_t>(self)].name;
    Handoff h;
    // Its last completed stream ran against `two` (the purge of its dropped copies still due).
    h.start(moved, self, s, true, {two, moved}, {}, {self, self});
    const Targets got = scan_targets(h, s);
    size_t dropped = 0;
    for (uint64_t id = 0; id < 6000; ++id) {
      const bool held = two->holds(id, static_cast<uint32_t>(self)) ||
                        moved->holds(id, static_cast<uint32_t>(self));
      if (!held) {
        CAPTURE(id);
        CHECK(got.count(id) == 0);  // an old copy: not sent
        dropped += three->holds(id, static_cast<uint32_t>(self)) ? 1 : 0;
      }
    }
    CHECK(dropped > 500);  // the run had such copies to leave out
    // Without the server's place in the history (an older caller), every record may go.
    Handoff old;
    old.start(moved, self, s, true, {two, moved});
    CHECK(scan_targets(old, s).size() >= got.size());
  }
}

TEST_CASE("handoff: an old copy is not streamed to a server back empty that the members refill") {
  // A nemesis run (seed 100): the copies went from 3 to 2, then hash2 came back empty; hash4 still
  // had its copies of ids it no longer held (their purge was due) and streamed them to hash2 beside
  // the members' newer ones, and an old copy of a heartbeat's second was kept over the newer one.
  auto three = replicated_ring(4, 3, 5);
  auto two = replicated_ring(4, 2, 6);
  RecordStore s = filled(0, 6000);
  size_t refilled = 0, hash2_ids = 0;
  for (const int self : {0, 2, 3}) {  // hash2 (1) is the one back empty
    CAPTURE(self);
    const std::string self_name = two->table().servers[static_cast<size_t>(self)].name;
    Handoff h;
    h.start(two, self, s, true, {three, two}, {"hash2"});
    const Targets got = scan_targets(h, s);
    for (uint64_t id = 0; id < 6000; ++id) {
      CAPTURE(id);
      const ReplicaSet set = two->replica_set(id);
      bool self_member = false, hash2_member = false;
      for (uint32_t k = 0; k < set.size; ++k) {
        const std::string& name = two->table().servers[set.routes[k].server].name;
        self_member = self_member || name == self_name;
        hash2_member = hash2_member || name == "hash2";
      }
      const auto it = got.find(id);
      bool to_hash2 = false, to_others = false;
      if (it != got.end()) {
        for (const auto& [name, shard] : it->second)
          (name == "hash2" ? to_hash2 : to_others) = true;
      }
      // The other member held it under both tables (a ring's 2 copies are its 3's first two).
      CHECK_FALSE(to_others);
      CHECK(to_hash2 == (hash2_member && self_member));
      refilled += to_hash2 ? 1 : 0;
      hash2_ids += self == 0 && hash2_member ? 1 : 0;
    }
  }
  // Each of hash2's ids is refilled once, by its other member.
  CHECK(hash2_ids > 1000);
  CHECK(refilled == hash2_ids);
}

TEST_CASE("handoff: with replicas the rescan after a lost link ignores the history") {
  auto router = replicated_ring(3, 3, 5);
  RecordStore s = filled(0, 3000);
  Handoff h;
  h.start(router, 1, s, true, {router});
  std::vector<Handoff::Batch> batches;
  CHECK(scan_targets(h, s, &batches).empty());
  CHECK(h.progress().state == State::kDone);
  // The same, but a link is lost while it runs (a batch must be in flight for that to matter):
  // a table with a new member gives it batches, one of which comes back over a broken link.
  auto four = replicated_ring(4, 3, 6);
  h.start(four, 1, s, true, {router, four});
  batches.clear();
  const Targets first = scan_targets(h, s, &batches);
  REQUIRE_FALSE(batches.empty());
  for (size_t i = 0; i < batches.size(); ++i) ack(h, batches[i], /*link_lost=*/i == 0);
  REQUIRE(h.scanning());
  const Targets again = scan_targets(h, s);
  check_targets(again, *four, "hash2", {}, 3000);
  CHECK(again.size() == 3000);
  CHECK(first.size() < again.size());
}
