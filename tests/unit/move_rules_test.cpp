// Tests of the rules by which the config server moves records (config_server/move_rules.h): when
// a pending purge of old copies may go, when a purge of everything is done, when a drained server
// is empty, and when a hash server is told to stream.
#include "config_server/move_rules.h"

#include <doctest/doctest.h>

#include <string>

#include "tests/cluster_events.h"

using namespace imhash;
using cluster::NodeRecord;
using cluster::NodeRegistry;
using control::StreamReport;
using control::StreamState;
using imhash::test::kDownAfterNs;
using imhash::test::kSecondNs;
using imhash::test::registration;

namespace {

StreamReport stream(StreamState state, uint64_t version) {
  StreamReport r;
  r.state = state;
  r.version = version;
  return r;
}

// A cluster after version 5 moved ids away from hash1: hash1 (its stream done at 5), hash2 and a
// login server, all on version 5 and connected.
NodeRegistry moved_cluster() {
  NodeRegistry reg(3 * kSecondNs);
  uint64_t link = 0;
  for (const auto& [role, name] : {std::pair{Role::kHash, "hash1"}, std::pair{Role::kHash, "hash2"},
                                   std::pair{Role::kLogin, "login1"}}) {
    reg.on_register(registration(role, name, 5), ++link, 0, 5);
  }
  reg.find({Role::kHash, "hash1"})->stream = stream(StreamState::kDone, 5);
  return reg;
}

const PendingPurge kPending{"hash1", 5, 60'000, true};  // not before Unix ms 60,000

}  // namespace

TEST_CASE("move rules: the automatic purge goes once all three conditions hold") {
  NodeRegistry reg = moved_cluster();
  const auto ready = cluster::purge_waits(kPending, reg, 60'000, 0);
  CHECK(ready.waits.empty());
  CHECK_FALSE(ready.held);

  // 1. The grace period (and a new leader's settle window).
  const auto early = cluster::purge_waits(kPending, reg, 59'000, 0);
  REQUIRE(early.waits.size() == 1);
  CHECK(early.waits[0].find("grace period") == 0);
  const auto settling = cluster::purge_waits(kPending, reg, 60'000, 2 * kSecondNs);
  REQUIRE(settling.waits.size() == 1);
  CHECK(settling.waits[0].find("the nodes registering with the new leader") == 0);

  // 2. Every node that is waited for runs the version: a login server still on 4 holds it back...
  NodeRecord& login = *reg.find({Role::kLogin, "login1"});
  login.version = 4;
  const auto behind = cluster::purge_waits(kPending, reg, 60'000, 0);
  REQUIRE(behind.waits.size() == 1);
  CHECK(behind.waits[0] == "nodes to run version 5: login/login1");
  // ... unless it is LAGGING or DOWN (the heartbeat rule's exceptions).
  login.lagging = true;
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits.empty());
  login.lagging = false;
  login.up = false;
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits.empty());

  // 3. The server's stream is done at the version or a later one, and the server is reachable.
  NodeRecord& hash1 = *reg.find({Role::kHash, "hash1"});
  hash1.stream = stream(StreamState::kRunning, 5);
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits.size() == 1);
  hash1.stream = stream(StreamState::kDone, 4);
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits.size() == 1);
  hash1.stream = stream(StreamState::kDone, 6);
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits.empty());
  hash1.stream.reset();
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits ==
        std::vector<std::string>{"stream (no report since it registered)"});
  hash1.stream = stream(StreamState::kCancelled, 5);
  const auto cancelled = cluster::purge_waits(kPending, reg, 60'000, 0);
  CHECK(cancelled.held);  // only the operator releases it
  hash1.stream = stream(StreamState::kDone, 5);
  hash1.link = 0;
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits ==
        std::vector<std::string>{"server down (not connected)"});
  hash1.up = false;
  CHECK(cluster::purge_waits(kPending, reg, 60'000, 0).waits ==
        std::vector<std::string>{"server down (DOWN)"});
  const PendingPurge stranger{"hash9", 5, 0, false};
  CHECK(cluster::purge_waits(stranger, reg, 60'000, 0).waits.size() == 2);  // down, no stream
}

TEST_CASE("move rules: a purge of everything is done when every shard reports its id done") {
  NodeRecord n;
  n.shards = 2;
  n.rejoin_purge_id = 42;
  auto report = [](uint32_t shard, uint64_t id, frame::PurgeState state) {
    control::PurgeReport r;
    control::PurgeShard s;
    s.shard = shard;
    s.id = id;
    s.state = state;
    r.shards.push_back(s);
    return r;
  };
  // An earlier purge's reports, and this one's still running, do not count.
  CHECK_FALSE(cluster::record_purge_report(n, report(0, 41, frame::PurgeState::kDone)));
  CHECK_FALSE(cluster::record_purge_report(n, report(1, 41, frame::PurgeState::kDone)));
  CHECK_FALSE(cluster::record_purge_report(n, report(0, 42, frame::PurgeState::kRunning)));
  CHECK_FALSE(cluster::record_purge_report(n, report(0, 42, frame::PurgeState::kDone)));
  CHECK(n.purges.size() == 2);  // the latest of each shard, in shard order
  CHECK(n.purges[0].shard == 0);
  CHECK(cluster::record_purge_report(n, report(1, 42, frame::PurgeState::kDone)));
  // With no purge of everything outstanding, reports are only kept.
  NodeRecord plain;
  plain.shards = 1;
  CHECK_FALSE(cluster::record_purge_report(plain, report(0, 7, frame::PurgeState::kDone)));
  CHECK(plain.purges.size() == 1);
}

TEST_CASE("move rules: a drained server is one purged, with nothing pending, that holds nothing") {
  NodeRecord n;
  CHECK(cluster::drained(true, false, &n, 0.0));
  CHECK_FALSE(cluster::drained(false, false, &n, 0.0));          // its purge not sent yet
  CHECK_FALSE(cluster::drained(true, true, &n, 0.0));            // a purge still pending
  CHECK_FALSE(cluster::drained(true, false, &n, 12.0));          // still holds records
  CHECK_FALSE(cluster::drained(true, false, &n, std::nullopt));  // has not said
  CHECK_FALSE(cluster::drained(true, false, nullptr, 0.0));      // unknown
  n.rejoin_purge_id = 3;
  CHECK_FALSE(cluster::drained(true, false, &n, 0.0));  // purging everything
}

TEST_CASE("move rules: a server streams again unless done at the version, current, or cancelled") {
  NodeRecord n;
  const PendingPurge p{"hash1", 5, 0, true};
  CHECK(cluster::needs_stream(n, p, 6));  // no report yet
  n.stream = stream(StreamState::kDone, 5);
  CHECK_FALSE(cluster::needs_stream(n, p, 6));
  n.stream = stream(StreamState::kDone, 4);
  CHECK(cluster::needs_stream(n, p, 6));
  n.stream = stream(StreamState::kRunning, 6);  // against the current table: it carries on
  CHECK_FALSE(cluster::needs_stream(n, p, 6));
  n.stream = stream(StreamState::kRunning, 5);
  CHECK(cluster::needs_stream(n, p, 6));
  n.stream = stream(StreamState::kCancelled, 6);
  CHECK_FALSE(cluster::needs_stream(n, p, 6));
  n.stream = stream(StreamState::kIdle, 0);
  CHECK(cluster::needs_stream(n, p, 6));
}

TEST_CASE("move rules: the streams of a version run until each streaming server reports done") {
  // A CI run under ASan: a failover's streams took 1.05 s of a 1 s grace period, and lookups of
  // users not yet streamed to their new owner were answered NOT_FOUND once it ended.
  NodeRegistry reg = moved_cluster();
  Table before;
  before.servers = {{"hash1", "127.0.0.1:7001", 1, 1}, {"hash2", "127.0.0.1:7002", 1, 1}};
  Table now = before;  // version 5's servers
  NodeRecord& hash2 = *reg.find({Role::kHash, "hash2"});
  SUBCASE("a server without a report since it registered is not streaming") {
    CHECK_FALSE(cluster::streams_running(before, now, reg, 5));
  }
  SUBCASE("running, or done at an earlier version: running") {
    hash2.stream = stream(StreamState::kRunning, 5);
    CHECK(cluster::streams_running(before, now, reg, 5));
    hash2.stream = stream(StreamState::kDone, 4);
    CHECK(cluster::streams_running(before, now, reg, 5));
    hash2.stream = stream(StreamState::kDone, 5);
    CHECK_FALSE(cluster::streams_running(before, now, reg, 5));
    hash2.stream = stream(StreamState::kDone, 6);
    CHECK_FALSE(cluster::streams_running(before, now, reg, 5));
  }
  SUBCASE("a DOWN server's while the table has it; not once removed") {
    hash2.stream = stream(StreamState::kRunning, 5);
    hash2.up = false;
    CHECK(cluster::streams_running(before, now, reg, 5));
    now.servers.pop_back();
    CHECK_FALSE(cluster::streams_running(before, now, reg, 5));
  }
  SUBCASE("not a cancelled one's, nor one's not in the table before") {
    hash2.stream = stream(StreamState::kCancelled, 5);
    CHECK_FALSE(cluster::streams_running(before, now, reg, 5));
    hash2.stream = stream(StreamState::kRunning, 5);
    before.servers.pop_back();
    CHECK_FALSE(cluster::streams_running(before, now, reg, 5));
  }
}
