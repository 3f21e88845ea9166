// Tests of the config server's core (config_server/cluster_controller.h), driven without a socket
// or a clock: nodes' messages, closed links, ticks, admin commands and the store's answers go in
// with the time they happen, and the tests check the actions that come out (what is sent to which
// link, what is written, what is logged) and the state the const accessors show.
#include "config_server/cluster_controller.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/cluster_events.h"

// A named namespace: in a unity batch the helpers of other test files are next to these.
namespace imhash::cluster_controller_test {

using cluster::Actions;
using cluster::ChangePlan;
using cluster::ClusterController;
using cluster::ControllerSettings;
using cluster::LinkId;
using cluster::Now;
using cluster::Outcome;
using cluster::StoredState;
using control::StreamState;
using frame::PurgeAction;
using test::actions_of;
using test::actions_on;
using test::kDownAfterNs;
using test::kSecondNs;
using test::logged;
using test::registration;
using test::sent_on;

constexpr int64_t kHalfSecondNs = kSecondNs / 2;

ControllerSettings settings(bool failover_auto = false) {
  ControllerSettings s;
  s.heartbeat_ns = kSecondNs;
  s.missed_heartbeats_down = 3;  // DOWN after kDownAfterNs
  s.grace_ms = 1000;
  s.auto_purge = true;
  s.failover_auto = failover_auto;
  s.initial_mode = RoutingMode::kRange;
  return s;
}

// hashN's place in the tables: 127.0.0.1:700N, 2 shards.
ServerSpec spec(const std::string& name) {
  return ServerSpec{name, "127.0.0.1:700" + name.substr(name.size() - 1), 2, 1};
}

// A range table of hash1 and hash2 at `version`, the ids split at `at`.
Table two_servers(uint64_t version, uint64_t at) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRange;
  t.servers = {{"hash1", "127.0.0.1:7001", 2, 1}, {"hash2", "127.0.0.1:7002", 2, 1}};
  t.ranges = {{0, at - 1, "hash1"}, {at, UINT64_MAX, "hash2"}};
  return t;
}

// The version of the table a SendTable carries.
uint64_t pushed_version(const cluster::SendTable& s) {
  control::Message m;
  size_t used = 0;
  std::string error;
  REQUIRE(control::next_message(*s.framed, m, used, error) == control::DecodeStatus::kOk);
  REQUIRE(std::holds_alternative<control::TablePush>(m));
  return std::get<control::TablePush>(m).table.version;
}

void append(Actions& to, Actions from) {
  for (auto& a : from) to.push_back(std::move(a));
}

// The controller and the nodes around it. Nodes are named by role: "login1" is a login server,
// every other name a hash server. Time moves only through pass(), half a heartbeat at a time, as
// the adapter's timer ticks (a longer gap between ticks would count as a stalled loop).
struct Cluster {
  // Link n is dialled from 10.0.0.9, port 40000 + n.
  explicit Cluster(ControllerSettings s = settings())
      : c(std::move(s), 1000, [](LinkId l) { return "10.0.0.9:" + std::to_string(40000 + l); }) {}

  ClusterController c;
  Now now{100 * kSecondNs, 1'700'000'000'000'000};
  std::map<std::string, LinkId> link;    // each node's latest link
  std::map<std::string, uint64_t> runs;  // the version each node runs (its heartbeats say it)
  LinkId last_link = 0;

  static Role role(const std::string& name) {
    return name.starts_with("login") ? Role::kLogin : Role::kHash;
  }
  LinkId of(const std::string& name) { return link.at(name); }
  const cluster::NodeRecord& node(const std::string& name) {
    const cluster::NodeRecord* n = c.registry().find({role(name), name});
    REQUIRE(n != nullptr);
    return *n;
  }

  // `name` dials in on a new link and registers, running `version`.
  Actions join(const std::string& name, uint64_t version) {
    link[name] = ++last_link;
    runs[name] = version;
    return c.on_message(last_link, registration(role(name), name, version), now);
  }
  // Hash server `name` dials in on a new link and registers having started empty.
  Actions join_empty(const std::string& name) {
    control::Register fresh = registration(Role::kHash, name, 0);
    fresh.fresh = true;
    link[name] = ++last_link;
    runs[name] = 0;
    return c.on_message(last_link, fresh, now);
  }
  Actions send(const std::string& name, const control::Message& m) {
    return c.on_message(of(name), m, now);
  }
  Actions heartbeat(const std::string& name) {
    control::Heartbeat hb;
    hb.version = runs[name];
    return send(name, hb);
  }
  Actions ack(const std::string& name, uint64_t version) {
    runs[name] = version;
    return send(name, control::Ack{version});
  }
  Actions ack_all() {
    Actions out;
    for (const auto& [name, l] : link) append(out, ack(name, c.version()));
    return out;
  }
  Actions stream(const std::string& name, StreamState state, uint64_t version) {
    control::StreamReport r;
    r.state = state;
    r.version = version;
    return send(name, r);
  }
  // The store wrote the plan: the controller pushes it.
  Outcome commit(cluster::Change change) {
    REQUIRE(std::holds_alternative<ChangePlan>(change));
    return c.on_committed(std::get<ChangePlan>(std::move(change)), "", now);
  }
  // `ns` pass: every half second each node not in `silent` heartbeats, then the controller ticks.
  Actions pass(int64_t ns, const std::set<std::string>& silent = {}) {
    Actions out;
    for (int64_t t = 0; t < ns; t += kHalfSecondNs) {
      now.steady_ns += kHalfSecondNs;
      now.unix_us += kHalfSecondNs / 1000;
      for (const auto& [name, l] : link) {
        if (!silent.contains(name)) append(out, heartbeat(name));
      }
      append(out, c.tick(now));
    }
    return out;
  }
  // `names` register with no table and report their (idle) streams; the hash servers among them
  // make the first table (version 1), which every node installs.
  void start(const std::vector<std::string>& names) {
    std::vector<ServerSpec> specs;
    for (const std::string& name : names) {
      join(name, 0);
      if (role(name) == Role::kHash) {
        stream(name, StreamState::kIdle, 0);
        specs.push_back(spec(name));
      }
    }
    REQUIRE(commit(c.add_servers(specs, now)).answer.status == 200);
    ack_all();
    REQUIRE(c.version() == 1);
    REQUIRE(c.converged());
  }
};

const PendingPurge* pending_of(const ClusterController& c, const std::string& server) {
  for (const auto& p : c.pending()) {
    if (p.server == server) return &p;
  }
  return nullptr;
}

TEST_CASE("cluster controller: a hash server that registers is welcomed and pushed the table") {
  Cluster k;
  k.c.load(StoredState{two_servers(3, 1000), two_servers(2, 500), {}, {"hash1", "hash2"}}, k.now,
           false);
  const Actions behind = k.join("hash1", 1);
  const LinkId l1 = k.of("hash1");
  CHECK(actions_on<cluster::LabelLink>(behind, l1).at(0).key == "hash/hash1");
  // The heartbeat interval in ms, and the version it is to run.
  CHECK(sent_on<control::Welcome>(behind, l1) ==
        std::vector<control::Welcome>{control::Welcome{1000, 3}});
  const auto tables = actions_on<cluster::SendTable>(behind, l1);
  REQUIRE(tables.size() == 1);
  CHECK(pushed_version(tables[0]) == 3);
  CHECK(k.node("hash1").version == 1);
  CHECK(k.node("hash1").up);

  // One that runs the current table is welcomed and not pushed it again.
  const Actions current = k.join("hash2", 3);
  CHECK(sent_on<control::Welcome>(current, k.of("hash2")).size() == 1);
  CHECK(actions_of<cluster::SendTable>(current).empty());
}

TEST_CASE("cluster controller: a hash server registering an unspecified address is refused") {
  Cluster k;
  k.c.load(StoredState{two_servers(3, 1000), {}, {}, {"hash1", "hash2"}}, k.now, false);
  control::Register reg = registration(Role::kHash, "hash1", 1);
  reg.address = "0.0.0.0:7000";
  const Actions a = k.c.on_message(7, reg, k.now);
  const auto refused = actions_on<cluster::RefuseLink>(a, 7);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].refused.reason.find("unspecified address") != std::string::npos);
  CHECK(actions_of<cluster::LabelLink>(a).empty());
  CHECK(sent_on<control::Welcome>(a, 7).empty());
  CHECK(actions_of<cluster::SendTable>(a).empty());
  CHECK(k.c.find_hash("hash1") == nullptr);
}

TEST_CASE("cluster controller: a name held by a live link is refused until that link is gone") {
  Cluster k;
  k.start({"hash1", "hash2"});
  const LinkId first = k.of("hash1");
  // A second process under the same name while the first is up on an open link: refused.
  const Actions second = k.join("hash1", 1);
  const LinkId second_link = k.of("hash1");
  REQUIRE(actions_on<cluster::RefuseLink>(second, second_link).size() == 1);
  // The refusal and its log record name where the holder and the newcomer dial from.
  const std::string held_from = "connected from 10.0.0.9:" + std::to_string(40000 + first);
  CHECK(actions_on<cluster::RefuseLink>(second, second_link)[0].refused.reason.find(held_from) !=
        std::string::npos);
  CHECK(logged(second, "hash/hash1 from 10.0.0.9:" + std::to_string(40000 + second_link)));
  CHECK(sent_on<control::Welcome>(second, second_link).empty());
  CHECK(k.c.refused_name_held() == 1);
  CHECK(k.node("hash1").link == first);  // the holder keeps it
  k.c.on_link_closed(second_link);       // the adapter closes a refused link

  // The holder's link closes: the name is free, and the newcomer (on a new link) takes it. There
  // is no older link left to close.
  CHECK(logged(k.c.on_link_closed(first), "hash/hash1 disconnected"));
  const Actions retry = k.join("hash1", 1);
  const LinkId third = k.of("hash1");
  CHECK(sent_on<control::Welcome>(retry, third).size() == 1);
  CHECK(actions_on<cluster::LabelLink>(retry, third).at(0).key == "hash/hash1");
  CHECK(actions_of<cluster::CloseLink>(retry).empty());
  CHECK(actions_of<cluster::RefuseLink>(retry).empty());
  CHECK(k.node("hash1").link == third);
  CHECK(k.c.refused_name_held() == 1);

  // A holder that is DOWN with its link still open (frozen) frees the name too; its older link
  // is unlabelled and closed when another registers.
  k.pass(kDownAfterNs + kSecondNs, {"hash1"});
  REQUIRE_FALSE(k.node("hash1").up);
  const Actions takeover = k.join("hash1", 1);
  const LinkId fourth = k.of("hash1");
  CHECK(sent_on<control::Welcome>(takeover, fourth).size() == 1);
  CHECK(logged(takeover, "dropping its older link (10.0.0.9:" + std::to_string(40000 + third)));
  CHECK(actions_on<cluster::LabelLink>(takeover, third).at(0).key.empty());
  CHECK(actions_on<cluster::CloseLink>(takeover, third).size() == 1);
  CHECK(k.node("hash1").link == fourth);
  CHECK(k.node("hash1").up);
}

TEST_CASE("cluster controller: a version above the latest pushed is rejected and counted") {
  Cluster k;
  k.start({"hash1", "login1"});
  using cluster::VersionSource;
  control::Heartbeat above;
  above.version = 5;
  const Actions hb = k.send("hash1", above);
  CHECK(k.node("hash1").version == 1);
  CHECK(k.c.registry().rejected(VersionSource::kHeartbeat) == 1);
  CHECK(logged(hb, "heartbeat of version 5 rejected"));
  k.send("login1", control::Ack{9});
  CHECK(k.node("login1").version == 1);
  CHECK(k.c.registry().rejected(VersionSource::kAck) == 1);
  // A registration that names one: the node is taken to run nothing, and gets no push.
  const Actions reg = k.join("hash2", 4);
  CHECK(k.node("hash2").version == 0);
  CHECK(k.c.registry().rejected(VersionSource::kRegister) == 1);
  CHECK(actions_of<cluster::SendTable>(reg).empty());
}

TEST_CASE("cluster controller: after a takeover changes wait and the inherited version is held") {
  Cluster k;
  k.c.load(StoredState{two_servers(2, 1000), two_servers(1, 500), {}, {"hash1", "hash2"}}, k.now,
           true);
  // The settle window: at least TakeoverHold::kSettleNs, and at least the DOWN window (3 s here).
  CHECK(k.c.settling_ns(k.now) == std::max(cluster::TakeoverHold::kSettleNs, kDownAfterNs));
  const auto refused = std::get<Outcome>(k.c.add_servers({spec("hash3")}, k.now));
  CHECK(refused.answer.status == 503);
  // Nodes on version 1 keep it: welcomed with 1, no push (not even on their heartbeats).
  for (const std::string name : {"hash1", "login1"}) {
    const Actions a = k.join(name, 1);
    CHECK(sent_on<control::Welcome>(a, k.of(name)).at(0).config_version == 1);
    CHECK(actions_of<cluster::SendTable>(a).empty());
  }
  CHECK(actions_of<cluster::SendTable>(k.pass(kSecondNs)).empty());
  const std::set<LinkId> behind{k.of("hash1"), k.of("login1")};
  auto pushed_to = [](const Actions& a) {
    std::set<LinkId> links;
    for (const auto& s : actions_of<cluster::SendTable>(a)) links.insert(s.link);
    return links;
  };

  SUBCASE("a node that registers with it releases it to every node behind at once") {
    const Actions a = k.join("hash2", 2);
    CHECK(pushed_to(a) == behind);
    CHECK(sent_on<control::Welcome>(a, k.of("hash2")).at(0).config_version == 2);
  }
  SUBCASE("a node that heartbeats it releases it") {
    // A node with no table gets the version at once, and then shows it runs it.
    const Actions joined = k.join("hash2", 0);
    CHECK(pushed_to(joined) == std::set<LinkId>{k.of("hash2")});
    k.runs["hash2"] = 2;
    CHECK(pushed_to(k.heartbeat("hash2")) == behind);
  }
  SUBCASE("a login server a hash server answered MOVED with it releases it") {
    // A nemesis run: the dying leader (cut off, not killed) had pushed it to the hash servers,
    // which answered one login server on version 1 MOVED for 2 s: 2,278 UNAVAILABLEs.
    control::Heartbeat hb;
    hb.version = 1;
    hb.seen_version = 2;
    const Actions a = k.send("login1", hb);
    CHECK(pushed_to(a) == behind);
    CHECK(logged(a, "a hash server runs it"));
  }
  SUBCASE("the end of the settle window releases it") {
    CHECK(actions_of<cluster::SendTable>(k.pass(kSecondNs + kHalfSecondNs)).empty());
    CHECK(k.c.settling_ns(k.now) > 0);
    const Actions end = k.pass(kHalfSecondNs);
    CHECK(k.c.settling_ns(k.now) == 0);
    CHECK(pushed_to(end) == behind);
    CHECK(logged(end, "the settle window ended"));
    CHECK(std::holds_alternative<ChangePlan>(k.c.add_servers({spec("hash3")}, k.now)));
  }
}

TEST_CASE("cluster controller: an empty server waits for a replica of it to refill it") {
  // Issue 33: a server that came back empty registered with a new leader before its replicas
  // did. Taken for one with no replica up, it served reads from nothing.
  Cluster k;
  Table t = two_servers(2, 1000);
  t.replicas = 2;
  k.c.load(StoredState{t, {}, {}, {"hash1", "hash2"}}, k.now, true);
  const Actions a = k.join_empty("hash1");
  const auto fill = sent_on<control::FillCommand>(a, k.of("hash1"));
  REQUIRE(fill.size() == 1);
  CHECK(fill[0].filling);  // it serves no read meanwhile
  CHECK_FALSE(logged(a, "no other replica"));
  CHECK(logged(a, "serves no read until every replica of it is registered here"));
  SUBCASE("its replica registers, even after the settle window: refilled from it") {
    CHECK_FALSE(logged(k.pass(5 * kSecondNs), "no other replica"));
    k.join("hash2", 2);
    k.stream("hash2", StreamState::kIdle, 2);
    const Actions then = k.pass(kHalfSecondNs);
    CHECK(logged(then, "refilling it at version 2 from hash2"));
    CHECK(sent_on<control::StreamCommand>(then, k.of("hash2")).size() == 1);
  }
  SUBCASE("no replica comes back within the patience: it serves what it has") {
    CHECK_FALSE(logged(k.pass(29 * kSecondNs), "no other replica"));
    CHECK(logged(k.pass(kSecondNs + kHalfSecondNs), "no other replica came back to refill it"));
  }
}

TEST_CASE("cluster controller: an empty server waits for the settle window, then every replica") {
  // Issue 33: a server back empty at a new leader was refilled from the one replica that had
  // registered, 0.4 s before the two others found the leader: their records never reached it.
  Cluster k;
  Table t = two_servers(2, 1000);
  t.servers.push_back({"hash3", "127.0.0.1:7003", 2, 1});
  t.replicas = 3;
  k.c.load(StoredState{t, {}, {}, {"hash1", "hash2", "hash3"}}, k.now, true);
  CHECK(logged(k.join_empty("hash1"), "this leader is settling"));
  k.join("hash2", 2);
  k.stream("hash2", StreamState::kIdle, 2);
  Actions a = k.pass(kHalfSecondNs);
  CHECK_FALSE(logged(a, "refilling it"));  // the leader is settling: hash3 may still come
  k.join("hash3", 2);
  k.stream("hash3", StreamState::kIdle, 2);
  while (k.c.settling_ns(k.now) > 0) append(a, k.pass(kHalfSecondNs));
  append(a, k.pass(kHalfSecondNs));
  CHECK(logged(a, "refilling it at version 2 from hash2, hash3"));
  CHECK(sent_on<control::StreamCommand>(a, k.of("hash2")).size() == 1);
  CHECK(sent_on<control::StreamCommand>(a, k.of("hash3")).size() == 1);
}

TEST_CASE("cluster controller: an empty server waits for each replica, at most the patience") {
  // Issue 33: refilled from the two replicas registered while the third, which had the copies of
  // its whole range, had not found the new leader yet: 759 acknowledged writes read as absent.
  Cluster k;
  Table t = two_servers(2, 1000);
  t.servers.push_back({"hash3", "127.0.0.1:7003", 2, 1});
  t.replicas = 2;
  k.c.load(StoredState{t, {}, {}, {"hash1", "hash2", "hash3"}}, k.now, false);
  k.join("hash2", 2);
  k.stream("hash2", StreamState::kIdle, 2);
  CHECK(logged(k.join_empty("hash1"), "1 of 2 other servers are registered"));
  SUBCASE("the other registers: refilled from both") {
    CHECK_FALSE(logged(k.pass(5 * kSecondNs), "refilling it"));
    k.join("hash3", 2);
    k.stream("hash3", StreamState::kIdle, 2);
    CHECK(logged(k.pass(kHalfSecondNs), "refilling it at version 2 from hash2, hash3"));
  }
  SUBCASE("it does not come within the patience: refilled from the one there is") {
    CHECK_FALSE(logged(k.pass(29 * kSecondNs), "refilling it"));
    CHECK(logged(k.pass(kSecondNs + kHalfSecondNs), "refilling it at version 2 from hash2"));
  }
}

TEST_CASE("cluster controller: a node behind for the DOWN window is LAGGING and not waited for") {
  Cluster k;
  k.start({"hash1", "hash2"});
  REQUIRE(k.commit(k.c.assign(0, 999, "hash2", k.now)).answer.status == 200);
  k.ack("hash1", 2);  // hash2 stays on version 1 and keeps heartbeating
  CHECK_FALSE(k.c.converged());
  Actions a = k.pass(kDownAfterNs);
  CHECK_FALSE(k.node("hash2").lagging);
  CHECK_FALSE(k.c.converged());
  CHECK_FALSE(logged(a, "LAGGING"));
  a = k.pass(kHalfSecondNs);
  CHECK(k.node("hash2").lagging);
  CHECK(k.node("hash2").up);
  CHECK(k.c.converged());
  CHECK(logged(a, "hash/hash2 is LAGGING"));
  // It catches up.
  CHECK(logged(k.ack("hash2", 2), "hash/hash2 caught up"));
  CHECK_FALSE(k.node("hash2").lagging);
}

// hash1, hash2 and login1 on version 1; hash2 goes DOWN and is removed while DOWN (version 2),
// then heartbeats again on its old link. Returns what that heartbeat asked for.
Actions removed_while_down(Cluster& k) {
  k.start({"hash1", "hash2", "login1"});
  const Actions down = k.pass(kDownAfterNs + kSecondNs, {"hash2"});
  REQUIRE_FALSE(k.node("hash2").up);
  CHECK(logged(down, "hash/hash2 is DOWN"));
  REQUIRE(k.commit(k.c.remove_servers({"hash2"}, k.now)).answer.status == 200);
  // It could not stream what it held: its pending purge says so.
  REQUIRE(pending_of(k.c, "hash2") != nullptr);
  CHECK_FALSE(pending_of(k.c, "hash2")->streams);
  CHECK(k.c.was_ever_member("hash2"));
  return k.heartbeat("hash2");
}

control::PurgeReport purge_report(uint64_t id, frame::PurgeState shard1) {
  using frame::PurgeState;
  return control::PurgeReport{{{0, PurgeState::kDone, PurgeAction::kAll, 10, 10, 3, id},
                               {1, shard1, PurgeAction::kAll, 10, 10, 3, id}}};
}

TEST_CASE("cluster controller: a node that misses heartbeats is DOWN until it is heard again") {
  Cluster k;
  k.start({"hash1", "hash2"});
  const Actions a = k.pass(kDownAfterNs, {"hash2"});
  CHECK(k.node("hash2").up);  // not quite the DOWN window yet
  CHECK_FALSE(logged(a, "DOWN"));
  CHECK(logged(k.pass(kHalfSecondNs, {"hash2"}), "hash/hash2 is DOWN"));
  CHECK_FALSE(k.node("hash2").up);
  // Heard again on its old link: up, and (still in the table) not purged.
  const Actions back = k.heartbeat("hash2");
  CHECK(logged(back, "hash/hash2 is up again"));
  CHECK(k.node("hash2").up);
  CHECK(sent_on<control::PurgeCommand>(back, k.of("hash2")).empty());
}

TEST_CASE("cluster controller: a server removed while DOWN purges everything before it is back") {
  Cluster k;
  const Actions back = removed_while_down(k);
  const auto purges = sent_on<control::PurgeCommand>(back, k.of("hash2"));
  REQUIRE(purges.size() == 1);
  CHECK(purges[0].action == PurgeAction::kAll);
  CHECK(k.node("hash2").up);
  CHECK(k.node("hash2").rejoin_purge_id == purges[0].id);
  // The purge of everything replaces its pending purge (and that is written).
  CHECK(pending_of(k.c, "hash2") == nullptr);
  REQUIRE(actions_of<cluster::PersistPending>(back).size() == 1);
  CHECK(actions_of<cluster::PersistPending>(back)[0].pending == k.c.pending());

  const auto again = std::get<Outcome>(k.c.add_servers({spec("hash2")}, k.now));
  CHECK(again.answer.status == 409);
  CHECK(logged(k.send("hash2", purge_report(purges[0].id, frame::PurgeState::kDone)),
               "hash2: stale records purged"));
  CHECK(k.node("hash2").rejoin_purge_id == 0);
  CHECK(std::holds_alternative<ChangePlan>(k.c.add_servers({spec("hash2")}, k.now)));
}

TEST_CASE("cluster controller: only the reports of the purge sent on a rejoin end it") {
  Cluster k;
  const Actions back = removed_while_down(k);
  const uint64_t id = sent_on<control::PurgeCommand>(back, k.of("hash2")).at(0).id;
  // Another purge's reports (an earlier one, or one started by hand) do not count.
  k.send("hash2", purge_report(id - 1, frame::PurgeState::kDone));
  CHECK(k.node("hash2").rejoin_purge_id == id);
  CHECK(std::get<Outcome>(k.c.add_servers({spec("hash2")}, k.now)).answer.status == 409);
  // This one, but with a shard still running: not yet.
  k.send("hash2", purge_report(id, frame::PurgeState::kRunning));
  CHECK(k.node("hash2").rejoin_purge_id == id);
  // Every shard done with its id: over.
  k.send("hash2", purge_report(id, frame::PurgeState::kDone));
  CHECK(k.node("hash2").rejoin_purge_id == 0);
  CHECK(std::holds_alternative<ChangePlan>(k.c.add_servers({spec("hash2")}, k.now)));
}

TEST_CASE("cluster controller: the automatic purge waits for grace and acks and the stream") {
  Cluster k;
  k.start({"hash1", "hash2", "login1"});
  const Outcome moved = k.commit(k.c.assign(0, 999, "hash2", k.now));  // version 2
  REQUIRE(moved.answer.status == 200);
  const LinkId old_owner = k.of("hash1");
  CHECK(sent_on<control::StreamCommand>(moved.actions, old_owner) ==
        std::vector<control::StreamCommand>{{control::StreamAction::kStart, 2, {}}});
  const PendingPurge* p = pending_of(k.c, "hash1");
  REQUIRE(p != nullptr);
  CHECK(p->version == 2);
  CHECK(p->streams);
  CHECK(p->not_before_ms == k.now.unix_ms() + 1000);
  auto purged = [&](const Actions& a) {
    const auto purges = sent_on<control::PurgeCommand>(a, old_owner);
    return purges.size() == 1 && purges[0].action == PurgeAction::kNotOwned;
  };
  auto waits_for = [&](const std::string& what) {
    const PendingPurge* still = pending_of(k.c, "hash1");
    REQUIRE(still != nullptr);
    const auto w = k.c.purge_waits(*still, k.now).waits;
    return w.size() == 1 && w[0].starts_with(what);
  };
  Actions sent;

  SUBCASE("the grace period") {
    k.ack_all();
    CHECK_FALSE(purged(k.stream("hash1", StreamState::kDone, 2)));
    CHECK_FALSE(purged(k.pass(kHalfSecondNs)));
    CHECK(waits_for("grace period"));
    sent = k.pass(kHalfSecondNs);
  }
  SUBCASE("every node that is up and not LAGGING runs the version") {
    k.ack("hash1", 2);
    k.ack("hash2", 2);
    k.stream("hash1", StreamState::kDone, 2);
    CHECK_FALSE(purged(k.pass(2 * kSecondNs)));  // login1 heartbeats version 1
    CHECK(waits_for("nodes to run version 2: login/login1"));
    k.ack("login1", 2);
    sent = k.pass(kHalfSecondNs);
  }
  SUBCASE("the old owner's stream done at the version") {
    k.ack_all();
    CHECK_FALSE(purged(k.pass(2 * kSecondNs)));  // no report since the change
    CHECK_FALSE(purged(k.stream("hash1", StreamState::kRunning, 2)));
    CHECK_FALSE(purged(k.stream("hash1", StreamState::kDone, 1)));
    CHECK_FALSE(purged(k.pass(kHalfSecondNs)));
    CHECK(waits_for("stream done at version 2"));
    sent = k.stream("hash1", StreamState::kDone, 2);  // the report itself lets it go
  }
  CHECK(purged(sent));
  CHECK(pending_of(k.c, "hash1") == nullptr);
  const auto persisted = actions_of<cluster::PersistPending>(sent);
  REQUIRE(persisted.size() == 1);
  CHECK(persisted[0].pending == k.c.pending());
  for (const auto& entry : persisted[0].pending) CHECK(entry.server != "hash1");
}

TEST_CASE("cluster controller: while a version's streams run its login servers get it again") {
  // A CI run under ASan: a failover's streams took 1.05 s of a 1 s grace period, and lookups of
  // users not yet streamed to their new owner were answered NOT_FOUND once it ended. Each push of
  // the version a login server runs extends its grace period (RoutingState::with_grace_until).
  Cluster k;  // a grace period of 1 s; ticks every half second
  k.start({"hash1", "hash2", "login1"});
  REQUIRE(k.commit(k.c.assign(0, 999, "hash2", k.now)).answer.status == 200);  // version 2
  k.ack_all();
  k.stream("hash1", StreamState::kRunning, 2);
  k.stream("hash2", StreamState::kDone, 2);
  const auto pushes = [&](const Actions& a, const std::string& name) {
    const auto tables = actions_on<cluster::SendTable>(a, k.of(name));
    for (const auto& t : tables) CHECK(pushed_version(t) == 2);
    return tables.size();
  };
  // The first tick sees version 2; half a grace period later, and each half period after, it goes
  // again to the login server (not to the hash servers).
  const Actions first = k.pass(kSecondNs);
  CHECK(pushes(first, "login1") == 1);
  CHECK(pushes(first, "hash1") + pushes(first, "hash2") == 0);
  CHECK(logged(first, "version 2: its streams still run"));
  const Actions then = k.pass(kSecondNs);
  CHECK(pushes(then, "login1") == 2);
  CHECK_FALSE(logged(then, "its streams still run"));  // once a version
  SUBCASE("until the streams are done") {
    k.stream("hash1", StreamState::kDone, 2);
    CHECK(pushes(k.pass(2 * kSecondNs), "login1") == 0);
  }
  SUBCASE("and while the server streaming is DOWN but in the table (it streams when back)") {
    k.pass(kDownAfterNs + kSecondNs, {"hash1"});
    REQUIRE_FALSE(k.node("hash1").up);
    CHECK(pushes(k.pass(kSecondNs, {"hash1"}), "login1") == 2);
  }
}

TEST_CASE("cluster controller: a drain shows its version and then that its purge was sent") {
  Cluster k;
  k.start({"hash1", "hash2", "login1"});
  cluster::Change c = k.c.drain("hash2", k.now);
  REQUIRE(std::holds_alternative<ChangePlan>(c));
  CHECK(std::get<ChangePlan>(c).drained == "hash2");
  CHECK(std::get<ChangePlan>(c).table.server_index("hash2") < 0);
  const Outcome drained = k.commit(std::move(c));
  CHECK(k.c.version() == 2);
  REQUIRE(k.c.drains().count("hash2") == 1);
  CHECK(k.c.drains().at("hash2").version == 2);
  CHECK_FALSE(k.c.drains().at("hash2").purged);
  CHECK(sent_on<control::StreamCommand>(drained.actions, k.of("hash2")).size() == 1);

  k.ack_all();
  k.stream("hash1", StreamState::kDone, 2);
  k.stream("hash2", StreamState::kDone, 2);
  CHECK_FALSE(k.c.drains().at("hash2").purged);  // the grace period
  const Actions a = k.pass(kSecondNs);
  CHECK(sent_on<control::PurgeCommand>(a, k.of("hash2")).at(0).action == PurgeAction::kNotOwned);
  CHECK(k.c.drains().at("hash2").purged);

  // Again: nothing changes, and the answer says so.
  const auto again = std::get<Outcome>(k.c.drain("hash2", k.now));
  CHECK(again.answer.status == 200);
  const std::string change(again.answer.body.as_object().at("change").as_string());
  CHECK(change.find("already being drained") != std::string::npos);
  CHECK(k.c.version() == 2);
}

TEST_CASE(
    "cluster controller: a drained server is added back only once its old copies are purged") {
  // A nemesis run: the drain's state went with the config leader, the server was added back at
  // once and owned its old copies again; one was older than a heartbeat the others had.
  Cluster k;
  k.start({"hash1", "hash2", "login1"});
  k.commit(k.c.drain("hash2", k.now));
  k.ack_all();
  const auto refused = std::get<Outcome>(k.c.add_servers({spec("hash2")}, k.now));
  CHECK(refused.answer.status == 409);
  const std::string why(refused.answer.body.as_object().at("error").as_string());
  CHECK(why.find("old copies") != std::string::npos);
  CHECK(k.c.version() == 2);
  k.stream("hash1", StreamState::kDone, 2);
  k.stream("hash2", StreamState::kDone, 2);
  k.pass(kSecondNs);  // the purge goes out
  CHECK(std::holds_alternative<ChangePlan>(k.c.add_servers({spec("hash2")}, k.now)));
}

TEST_CASE("cluster controller: a change whose push exceeds the message limit is refused") {
  // A table of many ranges with long names: with itself as the table before, a change of it takes
  // more than control::kMaxMessageSize (16 MiB) to push: about 18.9 MB (139 bytes a range).
  const std::string a(64, 'a'), b(64, 'b');
  Table big;
  big.version = 1;
  big.mode = RoutingMode::kRange;
  big.servers = {{a, "127.0.0.1:7001", 2, 1}, {b, "127.0.0.1:7002", 2, 1}};
  constexpr uint64_t kRanges = 68'000;
  constexpr uint64_t kStep = UINT64_MAX / kRanges;
  for (uint64_t i = 0; i < kRanges; ++i) {
    const uint64_t hi = i + 1 == kRanges ? UINT64_MAX : (i + 1) * kStep - 1;
    big.ranges.push_back({i * kStep, hi, i % 2 ? b : a});
  }
  Cluster k;
  k.c.load(StoredState{big, std::nullopt, {}, {a, b}}, k.now, false);
  const cluster::Change c = k.c.split(10, k.now);
  REQUIRE(std::holds_alternative<Outcome>(c));
  const Outcome& refused = std::get<Outcome>(c);
  CHECK(refused.answer.status == 413);
  CHECK(logged(refused.actions, "above the control message limit"));
  CHECK(k.c.version() == 1);
  // A small change of a small table goes through.
  k.c.load(StoredState{two_servers(1, 1000), std::nullopt, {}, {"hash1", "hash2"}}, k.now, false);
  CHECK(std::holds_alternative<ChangePlan>(k.c.split(10, k.now)));
}

TEST_CASE("cluster controller: a failed store write answers 503 and changes nothing") {
  Cluster k;
  k.start({"hash1", "hash2"});
  cluster::Change c = k.c.add_servers({spec("hash3")}, k.now);
  REQUIRE(std::holds_alternative<ChangePlan>(c));
  const Outcome failed = k.c.on_committed(std::get<ChangePlan>(std::move(c)), "disk full", k.now);
  CHECK(failed.answer.status == 503);
  CHECK(logged(failed.actions, "disk full"));
  CHECK(actions_of<cluster::SendTable>(failed.actions).empty());
  CHECK(k.c.version() == 1);
  CHECK(k.c.router()->table().server_index("hash3") < 0);
  CHECK(k.c.pending().empty());
}

TEST_CASE("cluster controller: with automatic failover a DOWN hash server is removed") {
  Cluster k(settings(true));
  k.start({"hash1", "hash2", "hash3", "login1"});
  const Actions a = k.pass(kDownAfterNs + kSecondNs, {"hash3"});
  const auto commits = actions_of<cluster::CommitChange>(a);
  REQUIRE(commits.size() == 1);
  const ChangePlan& plan = commits[0].plan;
  CHECK(plan.table.version == 2);
  CHECK(plan.table.server_index("hash3") < 0);
  CHECK(plan.table.servers.size() == 2);
  CHECK(plan.change.find("failover") != std::string::npos);
  // The adapter writes it and hands it back: pushed to the nodes that are up.
  const Outcome done = k.c.on_committed(plan, "", k.now);
  CHECK(done.answer.status == 200);
  CHECK(k.c.version() == 2);
  CHECK(actions_on<cluster::SendTable>(done.actions, k.of("hash1")).size() == 1);
}

TEST_CASE("cluster controller: a standby forgets the nodes and its ticks do nothing") {
  Cluster k;
  k.start({"hash1", "hash2"});
  REQUIRE(k.commit(k.c.assign(0, 999, "hash2", k.now)).answer.status == 200);
  REQUIRE(!k.c.pending().empty());
  const Actions down = k.c.step_down();
  // Every node link is closed, and nothing of the cluster is kept: the leader's now.
  CHECK(actions_of<cluster::CloseLink>(down).size() == 2);
  CHECK(k.c.registry().nodes().empty());
  CHECK(k.c.pending().empty());
  // Long after the grace period and every DOWN window: nothing is purged, marked or logged.
  k.now.steady_ns += 100 * kSecondNs;
  k.now.unix_us += 100'000'000;
  CHECK(k.c.tick(k.now).empty());
  // Elected again, it serves from the store's state.
  StoredState state;
  state.current = two_servers(3, 1000);
  k.c.load(state, k.now, true);
  CHECK(k.c.version() == 3);
  CHECK(k.c.settling_ns(k.now) > 0);
}

}  // namespace imhash::cluster_controller_test
