// The config server's state in etcd (config_server/etcd_state_store.h) against a real etcd: what
// one store writes another reads back; a write from a config server that no longer holds the
// leader key, or based on a version another wrote since, is refused and reported lost, so no
// version is ever issued twice; a member lost is skipped.
#include "config_server/etcd_state_store.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <string>

#include "config_server/control_plane.h"
#include "harness/etcd_cluster.h"
#include "tests/sample_tables.h"

using namespace imhash;

namespace {

std::string prefix(const char* name) {
  return "/state-test-" + std::to_string(getpid()) + "-" + name;
}

// Creates PREFIX/leader (no lease) as an election would; returns its create revision (the fence).
int64_t take_leader(EtcdClient& etcd, const EtcdKeys& keys, const std::string& who) {
  const EtcdReply r = etcd.txn({{keys.leader, EtcdCompare::Target::kCreate, 0, {}}},
                               {{EtcdOp::Kind::kPut, keys.leader, who, 0, false},
                                {EtcdOp::Kind::kRange, keys.leader, {}, 0, false}});
  REQUIRE(r.ok());
  REQUIRE(r.succeeded);
  return r.ranges.at(0).at(0).create_revision;
}

// A client of every member of `cluster`.
EtcdClient client_of(test::EtcdCluster& cluster) {
  return EtcdClient(parse_etcd_url("etcd://" + cluster.endpoints(), "--store").endpoints,
                    std::chrono::milliseconds(1000));
}

}  // namespace

TEST_CASE("etcd state store: what one writes another reads, and a deposed writer is refused") {
  test::EtcdCluster cluster(3);
  EtcdClient etcd = client_of(cluster);
  EtcdStateStore a(etcd, prefix("rw"));
  REQUIRE(a.reload() == "");
  CHECK(a.version() == 0);
  CHECK(a.commit(test::ring_of(1, {"hash1"}), "first", {}) != "");  // not leading: no fence
  a.set_fence(take_leader(etcd, a.keys(), "a"));
  REQUIRE(a.commit(test::ring_of(1, {"hash1"}), "server added hash1", {}) == "");
  const std::vector<PendingPurge> pending{{"hash1", 2, 1764615094000, true}};
  REQUIRE(a.commit(test::ring_of(2, {"hash1", "hash2"}), "server added hash2", pending) == "");

  EtcdStateStore b(etcd, prefix("rw"));
  REQUIRE(b.reload() == "");
  CHECK(b.version() == 2);
  REQUIRE(b.history().size() == 2);
  CHECK(b.history()[0].change == "server added hash2");
  CHECK(b.history()[1].version == 1);
  CHECK(b.pending_purges() == pending);
  CHECK(b.describe().starts_with("etcd://"));

  // b takes over: the leader key is deleted (a's lease ran out) and b creates it.
  REQUIRE(etcd.txn({}, {{EtcdOp::Kind::kDelete, b.keys().leader, {}, 0, false}}).ok());
  b.set_fence(take_leader(etcd, b.keys(), "b"));
  REQUIRE(b.commit(test::ring_of(3, {"hash1", "hash2", "hash3"}), "server added hash3", {}) == "");

  // a, deposed without knowing it, cannot issue version 3 again: refused and reported lost.
  std::string lost;
  a.on_lost = [&](const std::string& why) { lost = why; };
  CHECK(a.commit(test::ring_of(3, {"hash1"}), "a stale change", {}) != "");
  CHECK(lost.find("another config server") != std::string::npos);
  CHECK(a.set_pending_purges({}) != "");  // refused until it reads the store again
  REQUIRE(a.reload() == "");
  CHECK(a.version() == 3);
  CHECK(a.history()[0].change == "server added hash3");
  CHECK(a.commit(test::ring_of(4, {"hash1"}), "still deposed", {}) != "");  // the fence is b's

  // A writer based on an older version is refused even with the right fence.
  EtcdStateStore c(etcd, prefix("rw"));
  REQUIRE(c.reload() == "");
  c.set_fence(b.fence());
  REQUIRE(b.commit(test::ring_of(4, {"hash1", "hash2"}), "server removed hash3", {}) == "");
  CHECK(c.commit(test::ring_of(4, {"hash9"}), "based on version 3", {}) != "");
  EtcdStateStore d(etcd, prefix("rw"));
  REQUIRE(d.reload() == "");
  CHECK(d.version() == 4);
  CHECK(d.history()[0].change == "server removed hash3");
}

TEST_CASE(
    "etcd state store: a write through etcd's election after its leader is lost goes through, "
    "all lost is an error naming etcd") {
  test::EtcdCluster cluster(3);
  EtcdClient etcd = client_of(cluster);
  EtcdStateStore s(etcd, prefix("lost"));
  s.set_retry_for(std::chrono::seconds(4));  // as the config server sets it
  REQUIRE(s.reload() == "");
  s.set_fence(take_leader(etcd, s.keys(), "s"));
  // The raft leader, the hardest member to lose: the others wait an election timeout or two
  // before they elect a new one, and requests sent meanwhile get no answer.
  cluster.kill(cluster.raft_leader());
  REQUIRE(s.commit(test::ring_of(1, {"hash1"}), "server added hash1", {}) == "");
  REQUIRE(s.commit(test::ring_of(2, {"hash1", "hash2"}), "server added hash2", {}) == "");
  EtcdStateStore other(etcd, prefix("lost"));
  REQUIRE(other.reload() == "");
  CHECK(other.version() == 2);
  CHECK(other.history().size() == 2);
  cluster.kill_all();
  std::string lost;
  s.on_lost = [&](const std::string& why) { lost = why; };
  const std::string err = s.commit(test::ring_of(3, {"hash1", "hash2"}), "server added hash3", {});
  CHECK(err.find("etcd unreachable") != std::string::npos);
  CHECK(lost != "");
  cluster.restart_all();
  cluster.wait_quorum();
  bool read = false;
  for (int i = 0; i < 50 && !read; ++i) read = s.reload() == "";
  REQUIRE(read);
  CHECK(s.version() == 2);  // the write that could not reach etcd was not applied
}
