// Tests of a hash server shard's rules (hash_server/shard_core.h), driven as its adapter drives
// them: frames in, answers and effects out, the time passed in. Each rule named in issue 32 has a
// case here, and tests/mutations/shard_core.py shows each case fails without its rule.
#include "hash_server/shard_core.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/routing/router.h"
#include "common/routing/shard_map.h"
#include "common/routing/table.h"
#include "tests/sample_endpoints.h"

using namespace imhash;
using frame::FrameStatus;
using frame::FrameType;
using frame::Request;
using frame::Response;
using imhash::test::record_endpoint;

namespace {

constexpr uint32_t kNow = 1'000'000;  // Unix seconds of the tests' first batch
constexpr uint64_t kMaxId = std::numeric_limits<uint64_t>::max();

// hash1 owns ids up to `split` - 1, hash2 the rest (one shard each); `replicas` copies.
std::shared_ptr<const Router> split_at(uint64_t split, uint64_t version, uint32_t replicas = 1) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRange;
  t.replicas = replicas;
  t.servers = {ServerInfo{"hash1", "10.0.0.1:7001", 1, 1},
               ServerInfo{"hash2", "10.0.0.2:7001", 1, 1}};
  if (replicas > 1) t.servers.push_back(ServerInfo{"hash3", "10.0.0.3:7001", 1, 1});
  t.ranges = {IdRange{0, split - 1, "hash1"}, IdRange{split, kMaxId, "hash2"}};
  REQUIRE(validate(t) == "");
  return Router::compile(t);
}

// One request through the core as the adapter passes it: encoded, framed, handled.
Response ask(ShardCore& core, const Request& q, uint32_t now = kNow) {
  std::vector<uint8_t> in, out;
  frame::append_request(q, in);
  frame::Header h;
  std::span<const uint8_t> body;
  size_t used = 0;
  REQUIRE(frame::next_frame(in, h, body, used) == frame::DecodeStatus::kOk);
  REQUIRE(core.handle(h, body, out, uint64_t{now} * 1000));
  frame::Header rh;
  std::span<const uint8_t> rbody;
  REQUIRE(frame::next_frame(out, rh, rbody, used) == frame::DecodeStatus::kOk);
  Response r;
  REQUIRE(frame::decode_response(rh, rbody, r) == frame::DecodeStatus::kOk);
  return r;
}

Request get(uint64_t id, uint64_t version, uint8_t flags = 0) {
  return Request{.type = FrameType::kGet, .flags = flags, .table_version = version, .id = id};
}
Request upsert(uint64_t id, uint64_t version, Endpoint e, uint32_t age = 0, uint8_t flags = 0) {
  return Request{.type = FrameType::kUpsert,
                 .flags = flags,
                 .table_version = version,
                 .id = id,
                 .endpoint = e,
                 .age_seconds = age};
}
Request erase(uint64_t id, uint64_t version, uint8_t flags = 0) {
  return Request{.type = FrameType::kDelete, .flags = flags, .table_version = version, .id = id};
}
// An IMPORT of `records` cut under table `version`; `bytes` keeps the encoded records alive.
// With kFlagTimed (`flags`) the records' age_seconds are the seconds they were last seen.
Request import(const std::vector<frame::ImportRecord>& records, uint64_t version,
               std::vector<uint8_t>& bytes, uint8_t flags = 0) {
  bytes.clear();
  for (const auto& r : records) frame::append_import_record(r, bytes);
  return Request{
      .type = FrameType::kImport,
      .flags = flags,
      .table_version = version,
      .record_count = static_cast<uint16_t>(records.size()),
      .records = std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())};
}

// The ids in the stream's batches.
std::set<uint64_t> ids_in(const std::vector<Handoff::Batch>& batches) {
  std::set<uint64_t> ids;
  for (const auto& b : batches) {
    std::string_view rest(reinterpret_cast<const char*>(b.records.data()), b.records.size());
    frame::ImportRecord r;
    while (frame::next_import_record(rest, r)) ids.insert(r.id);
  }
  return ids;
}

const Endpoint kPhone = Endpoint::v4(0x0A000105, 40001);
const Endpoint kDesk = Endpoint::v4(0x0A000106, 40002);

}  // namespace

TEST_CASE("shard core: MOVED by table version: ours at least as new as the sender's") {
  ShardCore core(0, 1, "hash1", 0);
  core.set_router(split_at(1000, 2), 0, kNow);
  // Owned: served, and the answer carries our version.
  Response r = ask(core, get(5, 2));
  CHECK(r.status == FrameStatus::kNotFound);
  CHECK(r.table_version == 2);
  // Not ours, the sender's table as old as ours or older: MOVED.
  CHECK(ask(core, get(1500, 2)).status == FrameStatus::kMoved);
  CHECK(ask(core, get(1500, 1)).status == FrameStatus::kMoved);
  CHECK(ask(core, upsert(1500, 2, kPhone)).status == FrameStatus::kMoved);
  CHECK(core.counters().moved == 3);
  // A sender with a newer table knows better: served.
  CHECK(ask(core, get(1500, 3)).status == FrameStatus::kNotFound);
  // A fallback read asks this server on purpose; a write never does.
  CHECK(ask(core, get(1500, 2, frame::kFlagAnyOwner)).status == FrameStatus::kNotFound);
  CHECK(ask(core, upsert(1500, 2, kPhone, 0, frame::kFlagAnyOwner)).status == FrameStatus::kMoved);
  // Another shard's id: WRONG_SHARD, whatever the table.
  ShardCore second(1, 2, "hash1", 0);
  second.set_router(split_at(1000, 2), 0, kNow);
  uint64_t first_shards = 0;
  while (shard_of(first_shards, 2) != 0) ++first_shards;
  CHECK(ask(second, get(first_shards, 2)).status == FrameStatus::kWrongShard);
}

TEST_CASE("shard core: with replicas a write under an older table is MOVED even to a member") {
  ShardCore core(0, 1, "hash1", 0);
  core.set_router(split_at(1000, 3, /*replicas=*/2), 0, kNow);
  // The sender fans the write out under its older table: a member our table added would miss it.
  CHECK(ask(core, upsert(5, 2, kPhone)).status == FrameStatus::kMoved);
  CHECK(ask(core, erase(5, 2)).status == FrameStatus::kMoved);
  // Under our table, or from a tool without one (version 0): written. Reads are never stale here.
  CHECK(ask(core, upsert(5, 3, kPhone)).status == FrameStatus::kOk);
  CHECK(ask(core, upsert(6, 0, kPhone)).status == FrameStatus::kOk);
  CHECK(ask(core, get(5, 2)).status == FrameStatus::kOk);
}

TEST_CASE("shard core: a write that arrives after one made later never undoes it") {
  // Writes of one user reach a member by several connections (login servers, their threads,
  // writes held for it), each saying when it was made (kFlagTimed: Unix ms, the low 32 bits).
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), 0, kNow);
  // Made `age_ms` before the batch that reads it.
  const auto made = [](uint32_t age_ms) {
    return static_cast<uint32_t>(uint64_t{kNow} * 1000 - age_ms);
  };
  const auto timed_upsert = [&](uint64_t id, Endpoint e, uint32_t age_ms) {
    return upsert(id, 2, e, made(age_ms), frame::kFlagTimed);
  };
  const auto timed_delete = [&](uint64_t id, uint32_t age_ms) {
    Request q = erase(id, 2, frame::kFlagTimed);
    q.age_seconds = made(age_ms);
    return q;
  };
  ask(core, timed_upsert(1500, kDesk, 0));  // made at kNow (.000)
  ask(core, upsert(1600, 2, kDesk));        // untimed (an older login server): made on arrival
  SUBCASE("made before the write it meets, by less than a second: not applied") {
    ask(core, timed_upsert(1500, kPhone, 300));  // made at kNow - 0.3 s
    CHECK(ask(core, timed_delete(1600, 1)).status == FrameStatus::kOk);
    CHECK(core.counters().writes_superseded == 2);
    CHECK(ask(core, get(1500, 2)).endpoint == kDesk);
    CHECK(ask(core, get(1600, 2)).endpoint == kDesk);
  }
  SUBCASE("made at the same time or after: applied, with their age") {
    ask(core, timed_upsert(1500, kPhone, 0));
    CHECK(ask(core, get(1500, 2)).endpoint == kPhone);
    CHECK(ask(core, timed_delete(1600, 0)).status == FrameStatus::kOk);
    CHECK(ask(core, get(1600, 2)).status == FrameStatus::kNotFound);
    CHECK(ask(core, timed_delete(1600, 0)).status == FrameStatus::kNotFound);
    CHECK(core.counters().writes_superseded == 0);
    ask(core, timed_upsert(1700, kPhone, 4000));  // no record yet: stored, 4 s old
    CHECK(ask(core, get(1700, 2)).age_seconds == 4);
  }
  SUBCASE("a login made before a logout that came first does not bring the user back") {
    ask(core, erase(1500, 2));
    ask(core, timed_upsert(1500, kPhone, 200));
    CHECK(ask(core, get(1500, 2)).status == FrameStatus::kNotFound);
    CHECK(core.counters().writes_superseded == 1);
  }
  SUBCASE("nor one made before a timed logout that came first, where the user had no record") {
    CHECK(ask(core, timed_delete(1800, 0)).status == FrameStatus::kNotFound);
    ask(core, timed_upsert(1800, kPhone, 200));
    CHECK(ask(core, get(1800, 2)).status == FrameStatus::kNotFound);
    CHECK(core.counters().writes_superseded == 1);
  }
  SUBCASE("once the later write has left the table of recent ones, its second decides") {
    // Later writes of other ids take the table's entries of ids 1500 and 1600.
    for (uint64_t taken : {1500, 1600}) {
      uint64_t other = 2000;
      while (ShardCore::recent_write_slot(other) != ShardCore::recent_write_slot(taken)) ++other;
      ask(core, upsert(other, 2, kDesk));
    }
    ask(core, timed_upsert(1500, kPhone, 300));  // made in the second before: superseded
    CHECK(ask(core, get(1500, 2)).endpoint == kDesk);
    ask(core, timed_upsert(1600, kPhone, 0));  // made in the same second: applied
    CHECK(ask(core, get(1600, 2)).endpoint == kPhone);
    CHECK(core.counters().writes_superseded == 1);
  }
  SUBCASE("without the flag a write is applied whatever its age") {
    ask(core, upsert(1500, 2, kPhone, 30));
    CHECK(ask(core, get(1500, 2)).endpoint == kPhone);
    CHECK(ask(core, erase(1600, 2)).status == FrameStatus::kOk);
  }
}

TEST_CASE("shard core: with the no-tombstones defect put back, a streamed copy undoes a logout") {
  // IMHASH_DEFECTS=no-tombstones (common/runtime/defects.h), for the history checker's proof: the
  // rule of the next test case, switched off.
  ShardCore core(0, 1, "hash2", 0, /*remember_deletes=*/false);
  core.set_router(split_at(1000, 2), /*grace_s=*/5, kNow);
  CHECK(ask(core, erase(1500, 2)).status == FrameStatus::kNotFound);
  CHECK(core.tombstones() == 0);
  std::vector<uint8_t> bytes;
  ask(core, import({{.id = 1500, .age_seconds = 3, .endpoint = kPhone}}, 2, bytes));
  CHECK(core.counters().imported == 1);
  CHECK(ask(core, get(1500, 2)).endpoint == kPhone);
}

TEST_CASE(
    "shard core: a delete during a move is remembered: no streamed copy or repair brings "
    "the user back") {
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), /*grace_s=*/5, kNow);
  CHECK(ask(core, erase(1500, 2)).status == FrameStatus::kNotFound);
  CHECK(core.tombstones() == 1);
  std::vector<uint8_t> bytes;
  // The old owner's stream, cut before the logout, arrives after it.
  ask(core, import({{.id = 1500, .age_seconds = 3, .endpoint = kPhone}}, 2, bytes));
  CHECK(core.counters().import_skipped_deleted == 1);
  // Its miss says so: a login server asks no earlier owner (whose copy may predate the logout).
  const Response miss = ask(core, get(1500, 2));
  CHECK(miss.status == FrameStatus::kNotFound);
  CHECK(miss.flags == frame::kFlagDeleted);
  CHECK(ask(core, get(1501, 2)).flags == 0);  // a plain miss
  // So does a read repair (an UPSERT if absent) of the old owner's copy.
  ask(core, upsert(1500, 2, kPhone, 3, frame::kFlagIfAbsent));
  CHECK(core.counters().repairs_skipped_deleted == 1);
  CHECK(ask(core, get(1500, 2)).status == FrameStatus::kNotFound);
  // A login after the logout is the newest write: stored, and the delete forgotten.
  ask(core, upsert(1500, 2, kDesk));
  CHECK(core.tombstones() == 0);
  CHECK(ask(core, get(1500, 2)).endpoint == kDesk);
}

TEST_CASE("shard core: deletes are remembered for the grace period and the slack, then forgotten") {
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), /*grace_s=*/5, kNow);
  const uint32_t until = kNow + 5 + ShardCore::kTombstoneSlackS;
  ask(core, erase(1500, 2), until - 1);
  CHECK(core.tombstones() == 1);
  core.tick(until);
  CHECK(core.tombstones() == 0);
  // Past that time no move is under way: a delete leaves nothing behind...
  ask(core, erase(1600, 2), until + 100);
  CHECK(core.tombstones() == 0);
  // ...unless its sender runs a newer table than ours: a move we have not heard of yet.
  ask(core, erase(1700, 3), until + 200);
  CHECK(core.tombstones() == 1);
  // A table that places a remembered id elsewhere drops its tombstone (its owner keeps its own).
  core.set_router(split_at(2000, 3), 5, until + 200);  // 1700 goes to hash1
  CHECK(core.tombstones() == 0);
}

TEST_CASE("shard core: a delete shortly before a move is remembered once the move begins") {
  // Issue 33: a copy holder that missed a LOGOUT (frozen, cut off) streamed its older record to
  // the owner once a move began; the owner, which had the delete before any window was open,
  // stored it: the LOGOUT was undone.
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), /*grace_s=*/5, kNow);
  const uint32_t quiet = kNow + 5 + ShardCore::kTombstoneSlackS + 100;  // no window open
  core.tick(quiet);
  ask(core, upsert(1800, 2, kPhone), quiet);
  ask(core, erase(1500, 2), quiet);                                  // 3 s before the move
  ask(core, erase(1600, 2), quiet - ShardCore::kRecentDeleteS - 3);  // long before it
  ask(core, erase(1800, 2), quiet);
  ask(core, upsert(1800, 2, kDesk), quiet + 1);  // and logged in again since
  CHECK(core.tombstones() == 0);
  core.set_router(split_at(900, 3), 5, quiet + 3);  // a move: 1500, 1600 and 1800 stay here
  CHECK(core.tombstones() == 1);
  std::vector<uint8_t> bytes;
  ask(core,
      import({{.id = 1500, .age_seconds = 20, .endpoint = kPhone},
              {.id = 1600, .age_seconds = 200, .endpoint = kPhone},
              {.id = 1800, .age_seconds = 20, .endpoint = kPhone}},
             3, bytes),
      quiet + 4);
  CHECK(core.counters().import_skipped_deleted == 1);
  CHECK(ask(core, get(1500, 3), quiet + 4).status == FrameStatus::kNotFound);
  CHECK(ask(core, get(1800, 3), quiet + 4).endpoint == kDesk);
}

TEST_CASE("shard core: a streamed copy of a login made after a remembered delete is stored") {
  // A nemesis run (seed 11, a92eed5): a user logged out at hash2 under a table, logged in again
  // while the next table had left hash2 out of the id's set, and when a third table brought the
  // id back, the stream's copy of that login met the old logout's tombstone and was dropped: a
  // lookup at hash2 answered NOT_FOUND though the login had been acknowledged. A tombstone now
  // holds the second its delete was made; only a copy seen no later than that is dropped.
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), /*grace_s=*/5, kNow);
  const uint32_t quiet = kNow + 5 + ShardCore::kTombstoneSlackS + 100;  // no window open
  core.tick(quiet);
  ask(core, erase(1500, 2), quiet);  // a logout, applied when made
  // Two logouts made at quiet - 0.5 s, held for hash2 and replayed at quiet: remembered as made
  // then, not when applied (a timed DELETE carries its time as a timed UPSERT does).
  Request held = erase(1600, 2, frame::kFlagTimed);
  held.age_seconds = static_cast<uint32_t>(uint64_t{quiet} * 1000 - 500);
  ask(core, held, quiet);
  held.id = 1700;
  ask(core, held, quiet);
  core.set_router(split_at(900, 3), 5, quiet + 6);  // the ids come back: a window opens
  CHECK(core.tombstones() == 3);
  std::vector<uint8_t> bytes;
  ask(core,
      import({{.id = 1500, .age_seconds = quiet + 5, .endpoint = kDesk},   // a login since
              {.id = 1600, .age_seconds = quiet, .endpoint = kDesk},       // after it was made
              {.id = 1700, .age_seconds = quiet - 1, .endpoint = kDesk}},  // in its second
             3, bytes, frame::kFlagTimed),
      quiet + 6);
  CHECK(core.counters().import_skipped_deleted == 1);
  CHECK(ask(core, get(1500, 3), quiet + 6).endpoint == kDesk);
  CHECK(ask(core, get(1600, 3), quiet + 6).endpoint == kDesk);
  CHECK(ask(core, get(1700, 3), quiet + 6).status == FrameStatus::kNotFound);
}

TEST_CASE("shard core: an old copy's delete does not make the same LOGOUT's later copy older") {
  // A nemesis run (seed 22): hash4, drained, had its old copy of a user deleted by a LOGOUT
  // (untimed: an older login server's); the id came back to it, and the same LOGOUT's delete,
  // held for it and replayed, was refused as made before that "write". A stale copy streamed by
  // a member that had missed the LOGOUT then stayed: the user was back.
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(2000, 2), /*grace_s=*/5, kNow);  // 1500 is hash1's
  CHECK(ask(core, erase(1500, 1, frame::kFlagAnyOwner)).status == FrameStatus::kNotFound);
  core.set_router(split_at(1000, 3), 5, kNow);  // 1500 comes back: a window opens
  Request held = erase(1500, 3, frame::kFlagTimed);
  held.age_seconds = static_cast<uint32_t>(uint64_t{kNow} * 1000 - 2);  // made 2 ms before
  ask(core, held);
  CHECK(core.counters().writes_superseded == 0);
  CHECK(core.tombstones() == 1);
  std::vector<uint8_t> bytes;
  ask(core, import({{.id = 1500, .age_seconds = kNow - 10, .endpoint = kPhone}}, 3, bytes,
                   frame::kFlagTimed));
  CHECK(core.counters().import_skipped_deleted == 1);
  CHECK(ask(core, get(1500, 3)).status == FrameStatus::kNotFound);
}

TEST_CASE("shard core: a timed import carries when its records were seen: one that waited is old") {
  // A nemesis run (seed 11): hash4 came back empty; a batch of its refill, cut before a user's
  // heartbeat reached its source, reached it after the heartbeat and a second later than it was
  // cut. Its record, "0 s old" when cut, read as seen a second after it was: it overwrote the
  // heartbeat made after it, and a lookup 9 s later answered the write before.
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), 0, kNow);
  // The heartbeat: made at kNow + 0.900 s by the login server's clock, applied then.
  const auto made_ms = static_cast<uint32_t>(uint64_t{kNow} * 1000 + 900);
  ask(core, upsert(1500, 2, kDesk, made_ms, frame::kFlagTimed));
  std::vector<uint8_t> bytes;
  SUBCASE("timed: last seen at kNow, when cut; applied at kNow + 1: the heartbeat stays") {
    ask(core,
        import({{.id = 1500, .age_seconds = kNow, .endpoint = kPhone}}, 2, bytes,
               frame::kFlagTimed),
        kNow + 1);
    CHECK(core.counters().import_skipped_newer == 1);
    CHECK(ask(core, get(1500, 2), kNow + 1).endpoint == kDesk);
    // A record seen after the heartbeat's second is newer, and stored with that time.
    ask(core,
        import({{.id = 1500, .age_seconds = kNow + 1, .endpoint = kPhone}}, 2, bytes,
               frame::kFlagTimed),
        kNow + 5);
    const Response r = ask(core, get(1500, 2), kNow + 5);
    CHECK(r.endpoint == kPhone);
    CHECK(r.age_seconds == 4);
  }
  SUBCASE("untimed (an older sender): the age is taken as of the arrival") {
    ask(core, import({{.id = 1500, .age_seconds = 0, .endpoint = kPhone}}, 2, bytes), kNow + 1);
    CHECK(ask(core, get(1500, 2), kNow + 1).endpoint == kPhone);  // what timed imports prevent
  }
}

TEST_CASE("shard core: an import never overwrites a newer write") {
  ShardCore core(0, 1, "hash2", 0);
  core.set_router(split_at(1000, 2), 0, kNow);
  ask(core, upsert(1500, 2, kDesk));  // logged in at the new owner during the move
  std::vector<uint8_t> bytes;
  ask(core, import({{.id = 1500, .age_seconds = 30, .endpoint = kPhone},
                    {.id = 1600, .age_seconds = 30, .endpoint = kPhone}},
                   2, bytes));
  CHECK(core.counters().import_skipped_newer == 1);
  CHECK(core.counters().imported == 1);
  CHECK(ask(core, get(1500, 2)).endpoint == kDesk);
  const Response moved_in = ask(core, get(1600, 2));
  CHECK(moved_in.endpoint == kPhone);
  CHECK(moved_in.age_seconds == 30);  // its age travels with it
  // A batch cut under a table no newer than ours, which places the id elsewhere, is a move that
  // was overtaken: not stored.
  ask(core, import({{.id = 5, .age_seconds = 1, .endpoint = kPhone}}, 2, bytes));
  CHECK(core.counters().import_not_held == 1);
  CHECK(ask(core, get(5, 2, frame::kFlagAnyOwner)).status == FrameStatus::kNotFound);
}

TEST_CASE(
    "shard core: a LOGOUT during a stream: the old copy goes, unremembered, and is not sent") {
  // hash1 held everything; table 2 gives 1000 and up to hash2, and hash1 streams them there.
  ShardCore core(0, 1, "hash1", 0);
  core.set_router(split_at(kMaxId, 1), 0, kNow);
  for (uint64_t id = 0; id < 2000; ++id) ask(core, upsert(id, 1, record_endpoint(id)));
  core.set_router(split_at(1000, 2), 5, kNow);
  core.command_stream(control::StreamAction::kStart, 2, {});
  ShardCore::Effects started = core.take_effects();
  CHECK(started.stream_step);
  REQUIRE(started.events.size() == 1);
  CHECK(started.events[0].kind == ShardEvent::kStreamStarted);
  CHECK(started.events[0].count == 2000);
  // The login server (table 2) deletes the old copy of a user who logs out: by any owner.
  CHECK(ask(core, erase(1500, 2, frame::kFlagAnyOwner)).status == FrameStatus::kOk);
  // The new owner remembers that delete; this server must not, or a table moving the id back
  // would have it drop a later login streamed back to it.
  CHECK(core.tombstones() == 0);
  std::vector<Handoff::Batch> sent;
  for (int steps = 0; steps < 100 && core.handoff().scanning(); ++steps) {
    REQUIRE(core.next_stream_step(1).kind == ShardCore::StreamNext::kNow);
    for (auto& b : core.stream_step(kNow)) sent.push_back(std::move(b));
  }
  const std::set<uint64_t> ids = ids_in(sent);
  CHECK(ids.size() == 999);
  CHECK(ids.count(1500) == 0);
  CHECK(*ids.begin() == 1000);
}

TEST_CASE(
    "shard core: the stream's pacing: a bucket of 10 ms at the rate, and a window of batches") {
  constexpr double kRate = 25600;  // records per second: a bucket of 256, one batch
  ShardCore core(0, 1, "hash1", kRate);
  core.set_router(split_at(kMaxId, 1), 0, kNow);
  for (uint64_t id = 0; id < 20000; ++id) ask(core, upsert(id, 1, record_endpoint(id)));
  core.set_router(split_at(1, 2), 0, kNow);  // all but id 0 go to hash2
  core.command_stream(control::StreamAction::kStart, 2, {});
  core.take_effects();

  // Records a step cut (into batches, full ones sent at once, the rest when they fill).
  const auto step_cuts = [&] {
    const uint64_t before = core.handoff().progress().cut;
    core.stream_step(kNow);
    return core.handoff().progress().cut - before;
  };
  int64_t t = 5'000'000'000;
  REQUIRE(core.next_stream_step(t).kind == ShardCore::StreamNext::kNow);
  const uint64_t cut = step_cuts();
  REQUIRE(cut > 256);
  // The step spent more than the bucket held: the next waits until the rate has paid it back.
  ShardCore::StreamNext next = core.next_stream_step(t);
  REQUIRE(next.kind == ShardCore::StreamNext::kWait);
  const double expected_ns = static_cast<double>(cut) / kRate * 1e9;
  CHECK(static_cast<double>(next.wait_ns) >= expected_ns);
  CHECK(static_cast<double>(next.wait_ns) <= expected_ns + 2e6);
  t += next.wait_ns;
  CHECK(core.next_stream_step(t).kind == ShardCore::StreamNext::kNow);
  // A long pause earns no more than the bucket: after ten idle seconds the next step's debt is
  // still its records less one bucket.
  t += 10'000'000'000;
  REQUIRE(core.next_stream_step(t).kind == ShardCore::StreamNext::kNow);
  const uint64_t cut2 = step_cuts();
  next = core.next_stream_step(t);
  if (cut2 > 256) {
    REQUIRE(next.kind == ShardCore::StreamNext::kWait);
    const double debt_ns = static_cast<double>(cut2 - 256) / kRate * 1e9;
    CHECK(static_cast<double>(next.wait_ns) >= debt_ns);
    CHECK(static_cast<double>(next.wait_ns) <= debt_ns + 2e6);
  }

  // Without a rate, what holds the stream back is its window of unacknowledged batches.
  ShardCore fast(0, 1, "hash1", 0);
  fast.set_router(split_at(kMaxId, 1), 0, kNow);
  for (uint64_t id = 0; id < 20000; ++id) ask(fast, upsert(id, 1, record_endpoint(id)));
  fast.set_router(split_at(1, 2), 0, kNow);
  fast.command_stream(control::StreamAction::kStart, 2, {});
  fast.take_effects();
  std::vector<Handoff::Batch> in_flight;
  while (fast.next_stream_step(0).kind == ShardCore::StreamNext::kNow) {
    for (auto& b : fast.stream_step(kNow)) in_flight.push_back(std::move(b));
    REQUIRE(in_flight.size() < 1000);
  }
  CHECK(fast.handoff().scanning());
  CHECK(fast.handoff().progress().in_flight >= ShardCore::kStreamWindow);
  // Acknowledgements open the window again.
  fast.take_effects();
  size_t acked = 0;
  while (fast.handoff().progress().in_flight >= ShardCore::kStreamWindow) {
    REQUIRE(acked < in_flight.size());
    fast.acknowledged(in_flight[acked].generation, in_flight[acked].count, "hash2", false);
    ++acked;
    CHECK(fast.take_effects().stream_step);
  }
  CHECK(fast.next_stream_step(0).kind == ShardCore::StreamNext::kNow);
}

TEST_CASE("shard core: NOT_READY while being refilled, for reads that are not fallbacks or miss") {
  ShardCore core(0, 1, "hash1", 0);
  // No table yet: only a miss is in doubt.
  ask(core, upsert(5, 0, kPhone));
  core.set_filling(true);
  CHECK(ask(core, get(5, 0)).status == FrameStatus::kOk);
  CHECK(ask(core, get(6, 0)).status == FrameStatus::kNotReady);
  // With replicas every read goes to another copy until the refill is done, hit or miss; a
  // fallback read asks what this server holds, and its miss is in doubt too (a login server
  // takes an earlier member's NOT_FOUND for its whole set).
  core.set_router(split_at(1000, 2, /*replicas=*/2), 0, kNow);
  CHECK(ask(core, get(5, 2)).status == FrameStatus::kNotReady);
  CHECK(ask(core, get(6, 2)).status == FrameStatus::kNotReady);
  CHECK(ask(core, get(5, 2, frame::kFlagAnyOwner)).status == FrameStatus::kOk);
  CHECK(ask(core, get(6, 2, frame::kFlagAnyOwner)).status == FrameStatus::kNotReady);
  CHECK(core.counters().not_ready == 4);
  core.set_filling(false);
  CHECK(ask(core, get(5, 2)).status == FrameStatus::kOk);
  CHECK(ask(core, get(6, 2)).status == FrameStatus::kNotFound);
  // With one copy there is no other to ask: filling changes nothing.
  ShardCore single(0, 1, "hash1", 0);
  single.set_router(split_at(1000, 2), 0, kNow);
  single.set_filling(true);
  CHECK(ask(single, get(6, 2)).status == FrameStatus::kNotFound);
}

TEST_CASE("shard core: a PURGE request starts a purge the adapter steps until it says it is done") {
  ShardCore core(0, 1, "hash1", 0);
  core.set_router(split_at(kMaxId, 1), 0, kNow);
  for (uint64_t id = 0; id < 10000; ++id) ask(core, upsert(id, 1, record_endpoint(id)));
  core.set_router(split_at(5000, 2), 0, kNow);  // 5000 and up are hash2's now
  ask(core, Request{.type = FrameType::kPurge, .purge = frame::PurgeAction::kNotOwned});
  ShardCore::Effects e = core.take_effects();
  CHECK(e.purge_step);
  CHECK(e.changed);
  REQUIRE(e.events.size() == 1);
  CHECK(e.events[0].kind == ShardEvent::kPurgeStarted);
  int steps = 0;
  for (; e.purge_step && steps < 1000; ++steps) {
    core.purge_step(kNow);
    e = core.take_effects();
  }
  REQUIRE(!e.events.empty());
  CHECK(e.events.back().kind == ShardEvent::kPurgeFinished);
  CHECK(e.events.back().count == 5000);
  CHECK(e.changed);
  CHECK(core.store().size() == 5000);
  CHECK(!core.has_effects());
}
