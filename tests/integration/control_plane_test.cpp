// Several config servers on one etcd store (issue 17, docs/design.md §5): one leads, the others
// stand by and name it; a kill -9 of the leader in the middle of table changes, under a verified
// load, loses no version and issues none twice, and the data path never notices; a lost etcd
// member changes nothing; etcd unreachable refuses changes while lookups go on; etcd back, the
// control plane heals. A real 3-member etcd on loopback (harness/etcd_cluster.h).
#include "config_server/control_plane.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <set>
#include <string>

#include "config_server/etcd_state_store.h"
#include "config_server/table_edits.h"
#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/etcd_cluster.h"
#include "harness/http_get.h"
#include "harness/wait_until.h"
#include "tests/integration/sim_runs.h"

using namespace imhash::test;
namespace json = boost::json;

namespace {

// Three config servers on `etcd`, under a prefix of their own (tests share the machine).
ConfigClusterOptions on_etcd(const EtcdCluster& etcd, const char* name) {
  ConfigClusterOptions o;
  o.store = "etcd://" + etcd.endpoints() + "/test-" + std::to_string(getpid()) + "-" + name;
  o.config_servers = 3;
  o.lease_ttl_s = 2;
  return o;
}

int wait_leader(ConfigCluster& c) {
  int leader = -1;
  wait_until([&] { return (leader = c.leader()) >= 0; }, std::chrono::seconds(20));
  return leader;
}

// `imctl --admin ADDRESS ARGS` against one config server alone (no list to follow).
ImctlResult imctl_at(const std::string& admin, std::vector<std::string> args) {
  args.insert(args.begin(), {"--admin", admin});
  ChildProcess p(IMHASH_IMCTL, args);
  ImctlResult r;
  r.out = p.read_all();
  r.exit_code = p.stop(0);
  return r;
}

uint64_t version_of(const std::string& imctl_json_out) {
  return json::parse(imctl_json_out).as_object().at("version").to_number<uint64_t>();
}

// A table change through whichever config server leads, tried again (bounded) while none does or
// a new leader still waits for the nodes to register with it; the new version.
uint64_t change(ConfigCluster& c, std::vector<std::string> args) {
  args.insert(args.begin(), "--json");
  ImctlResult r;
  const bool done =
      wait_until([&] { return (r = c.imctl(args)).exit_code == 0; }, std::chrono::seconds(20));
  CAPTURE(r.out);
  REQUIRE(done);
  return version_of(r.out);
}

// The history holds each version from 1 to `latest` exactly once, newest first, and nothing else.
void check_history(ConfigCluster& c, uint64_t latest) {
  const json::value h = c.imctl_json({"history", "--limit", "1000"});
  std::vector<uint64_t> versions;
  for (const json::value& e : h.as_object().at("versions").as_array()) {
    versions.push_back(e.as_object().at("version").to_number<uint64_t>());
  }
  REQUIRE(versions.size() == latest);
  for (size_t i = 0; i < versions.size(); ++i) CHECK(versions[i] == latest - i);
}

}  // namespace

TEST_CASE("control plane: of three config servers on etcd one leads and the standbys name it") {
  EtcdCluster etcd(3);
  ConfigCluster c(on_etcd(etcd, "leader"));
  c.start_config();
  const int leader = wait_leader(c);
  REQUIRE(leader >= 0);
  const std::string leader_name = "cfg" + std::to_string(leader);
  for (int i = 0; i < 3; ++i) {
    if (i == leader) continue;
    // Asked directly, a standby answers 503 naming the leader...
    const HttpReply r = http_get(c.admin_address(i), "/v1/status");
    CHECK(r.status == 503);
    CAPTURE(r.body);
    CHECK(r.body.find("standby") != std::string::npos);
    CHECK(json::parse(r.body).as_object().at("leader").as_object().at("admin").as_string() ==
          c.admin_address(leader));
    // ...and imctl, given only the standby, follows it there.
    const ImctlResult followed = imctl_at(c.admin_address(i), {"--json", "status"});
    CHECK(followed.exit_code == 0);
    CHECK(followed.out.find("\"role\":\"leader\"") != std::string::npos);
  }
  // The leader shows itself, the two standbys and the store.
  CHECK(wait_until([&] {
    const json::object st = c.imctl_json({"status"}).as_object();
    const json::object& plane = st.at("control_plane").as_object();
    return plane.at("role").as_string() == "leader" &&
           plane.at("leader").as_object().at("name").as_string() == leader_name &&
           plane.at("standbys").as_array().size() == 2 &&
           plane.at("store").as_string().starts_with("etcd://");
  }));
  // Nodes configured with all three register with the leader (the standbys send them there);
  // imctl given all three follows the leader too.
  c.start_hash(1);
  c.start_hash(2);
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2"}).exit_code == 0);
  const uint16_t udp = c.start_login(1);
  REQUIRE(c.wait_converged(1, 3));
  log_in(udp, 1, 300);
  CHECK(found(udp, 1, 300) == 300);
}

TEST_CASE(
    "control plane: a kill -9 of the leader during table changes under load loses no version, "
    "issues none twice, and fails no lookup") {
  EtcdCluster etcd(3);
  ConfigCluster c(on_etcd(etcd, "takeover"));
  const uint16_t udp = c.start_serving(2);
  auto sim = start_load(udp, 1, 2000, 1000, 14);
  uint64_t acknowledged = c.version();
  for (int round = 0; round < 2; ++round) {
    const int leader = wait_leader(c);
    REQUIRE(leader >= 0);
    const std::string lo = std::to_string(1 + 400 * round);
    const std::string hi = std::to_string(200 + 400 * round);
    acknowledged = change(c, {"assign", lo + "-" + hi, "hash2"});
    // In the middle of the next change: imctl asks, and the leader dies at once.
    ChildProcess change(IMHASH_IMCTL,
                        {"--admin", c.admin_address(), "--json", "assign", lo + "-" + hi, "hash1"});
    c.kill_config(leader);
    const std::string out = change.read_all();
    if (change.stop(0) == 0) acknowledged = version_of(out);
    const int next = wait_leader(c);
    REQUIRE(next >= 0);
    CHECK(next != leader);
    // Whatever the operator was told is there; the change imctl could not hear about may be.
    CHECK(c.version() >= acknowledged);
    c.start_config(leader);  // back, as a standby
  }
  // One more change through the last leader: every node converges on it.
  const uint64_t latest = change(c, {"assign", "1501-1600", "hash2"});
  CHECK(latest >= acknowledged + 1);
  CHECK(c.wait_converged(latest, 3));
  check_history(c, latest);
  check_load(*sim);
}

TEST_CASE(
    "control plane: a lost etcd member changes nothing, etcd unreachable refuses changes while "
    "lookups go on, and etcd back heals it") {
  EtcdCluster etcd(3);
  ConfigCluster c(on_etcd(etcd, "etcd"));
  const uint16_t udp = c.start_serving(2);
  log_in(udp, 1, 500);
  const int leader = wait_leader(c);
  REQUIRE(leader >= 0);

  // etcd's raft leader is lost: nothing changes. A change made at once waits out etcd's election
  // (about two election timeouts) and goes through; the config server keeps leading.
  etcd.kill(etcd.raft_leader());
  const ImctlResult one = c.imctl({"--json", "assign", "1-100", "hash2"});
  CAPTURE(one.out);
  REQUIRE(one.exit_code == 0);
  const uint64_t v = version_of(one.out);
  CHECK(c.wait_converged(v, 3));
  CHECK(c.leader() == leader);

  // All of etcd is lost: changes are refused, the data path goes on.
  etcd.kill_all();
  const ImctlResult refused = c.imctl({"--json", "assign", "101-200", "hash2"});
  CHECK(refused.exit_code != 0);
  CAPTURE(refused.out);
  CHECK(found(udp, 1, 500) == 500);

  // etcd back: a leader again (maybe another), from the state etcd holds.
  etcd.restart_all();
  etcd.wait_quorum();
  REQUIRE(wait_leader(c) >= 0);
  const uint64_t after = c.version();
  CHECK(after >= v);
  const uint64_t latest = change(c, {"assign", "101-200", "hash2"});
  CHECK(latest == after + 1);
  CHECK(c.wait_converged(latest, 3));
  check_history(c, latest);
  CHECK(found(udp, 1, 500) == 500);
}

TEST_CASE(
    "control plane: a version the dying leader committed but pushed to no node reaches every "
    "node together, and no lookup fails") {
  EtcdCluster etcd(3);
  const ConfigClusterOptions options = on_etcd(etcd, "unpushed");
  ConfigCluster c(options);
  const uint16_t udp = c.start_serving(2);
  const uint64_t before = c.version();
  auto sim = start_load(udp, 1, 2000, 1000, 14);

  // Every config server dies; then, as the leader would have done in the instant before it was
  // killed, the next version is committed in etcd (a range moved, with its pending purges) and
  // pushed to nobody. The nodes keep running the version before.
  c.kill_config();
  const imhash::EtcdUrl url = imhash::parse_etcd_url(options.store, "--store");
  imhash::EtcdClient client(url.endpoints, std::chrono::milliseconds(1000));
  imhash::EtcdStateStore store(client, url.prefix);
  REQUIRE(store.reload() == "");
  REQUIRE(store.version() == before);
  const imhash::EtcdKeys& keys = store.keys();
  // The dead leader's key goes with its lease (TTL 2 s); this writer takes it without a lease.
  imhash::EtcdReply took;
  REQUIRE(wait_until(
      [&] {
        took = client.txn({{keys.leader, imhash::EtcdCompare::Target::kCreate, 0, {}}},
                          {{imhash::EtcdOp::Kind::kPut, keys.leader, "test", 0, false},
                           {imhash::EtcdOp::Kind::kRange, keys.leader, {}, 0, false}});
        return took.ok() && took.succeeded;
      },
      std::chrono::seconds(20)));
  store.set_fence(took.ranges.at(0).at(0).create_revision);
  imhash::TableResult next = imhash::assign_range(*store.current(), 1, 1000, "hash2");
  REQUIRE(next.ok());
  next.table->version = before + 1;
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::vector<imhash::PendingPurge> pending;
  for (const auto& s : store.current()->servers) {
    pending.push_back({s.name, before + 1, static_cast<uint64_t>(now_ms) + 5000, true});
  }
  REQUIRE(store.commit(*next.table, "assign 1-1000 hash2", pending) == "");
  REQUIRE(client.txn({}, {{imhash::EtcdOp::Kind::kDelete, keys.leader, {}, 0, false}}).ok());

  // Back: one leads with that version, and every node gets it, together, while the load runs.
  c.start_config();
  REQUIRE(wait_leader(c) >= 0);
  CHECK(c.version() == before + 1);
  CHECK(c.wait_converged(before + 1, 3));
  check_history(c, before + 1);
  check_load(*sim);
}
