// Tests of the config server's node registry (config_server/node_registry.h), driven with events
// and times as the config server's adapter passes them: who may register under a name, which
// version a node is taken to run, DOWN and back, LAGGING, and convergence.
#include "config_server/node_registry.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/cluster_events.h"

using namespace imhash;
using cluster::LinkId;
using cluster::NodeKey;
using cluster::NodeRecord;
using cluster::NodeRegistry;
using cluster::VersionSource;
using cluster::VersionTaken;
using imhash::test::kDownAfterNs;
using imhash::test::kSecondNs;
using imhash::test::registration;

namespace {

const NodeKey kHash1{Role::kHash, "hash1"};
const NodeKey kLogin1{Role::kLogin, "login1"};

}  // namespace

TEST_CASE("node registry: hash servers come before login servers, each by name") {
  NodeRegistry reg(kDownAfterNs);
  reg.on_register(registration(Role::kLogin, "a-login", 0), 1, 0, 0);
  reg.on_register(registration(Role::kHash, "z-hash", 0), 2, 0, 0);
  reg.on_register(registration(Role::kHash, "b-hash", 0), 3, 0, 0);
  std::vector<std::string> order;
  for (const auto& [key, n] : reg.nodes()) order.push_back(key.text());
  CHECK(order == std::vector<std::string>{"hash/b-hash", "hash/z-hash", "login/a-login"});
}

TEST_CASE("node registry: a name held by a live link is refused to another link") {
  NodeRegistry reg(kDownAfterNs);
  constexpr LinkId kFirst = 1, kSecondLink = 2;
  CHECK_FALSE(reg.name_held(kHash1, kSecondLink, true));  // nobody has it
  reg.on_register(registration(Role::kHash, "hash1", 0), kFirst, 0, 0);
  CHECK(reg.name_held(kHash1, kSecondLink, true));         // live: up, its link open
  CHECK_FALSE(reg.name_held(kHash1, kFirst, true));        // its own link registers again
  CHECK_FALSE(reg.name_held(kHash1, kSecondLink, false));  // its link is closing
  // A hash server and a login server may share a name.
  CHECK_FALSE(reg.name_held(NodeKey{Role::kLogin, "hash1"}, kSecondLink, true));
  // DOWN: the heartbeat rule frees the name even while the link looks open (a frozen process).
  CHECK(reg.mark_down(kDownAfterNs + 1, 0) == std::vector<NodeKey>{kHash1});
  CHECK_FALSE(reg.name_held(kHash1, kSecondLink, true));
  // Its link closed: free too; the node stays known.
  reg.on_register(registration(Role::kHash, "hash1", 0), kFirst, kDownAfterNs + 2, 0);
  CHECK(reg.name_held(kHash1, kSecondLink, true));
  reg.on_link_closed(kFirst);
  CHECK_FALSE(reg.name_held(kHash1, kSecondLink, true));
  REQUIRE(reg.find(kHash1) != nullptr);
  CHECK(reg.find(kHash1)->link == 0);
  CHECK(reg.on_link(kFirst) == nullptr);
}

TEST_CASE("node registry: a registration on a new link replaces the old one and its progress") {
  NodeRegistry reg(kDownAfterNs);
  auto first = reg.on_register(registration(Role::kHash, "hash1", 3), 1, 0, 5);
  CHECK_FALSE(first.was_up);
  CHECK(first.replaced_link == 0);
  first.node.stream = control::StreamReport{};
  first.node.purges.push_back(control::PurgeShard{});
  const auto again = reg.on_register(registration(Role::kHash, "hash1", 2), 7, kSecondNs, 5);
  CHECK(again.was_up);
  CHECK(again.replaced_link == 1);
  CHECK(again.node.link == 7);
  CHECK(reg.on_link(7) == &again.node);
  CHECK(reg.on_link(1) == nullptr);
  // Another process, perhaps: what it says now (lower after a restart from an older table).
  CHECK(again.node.version == 2);
  CHECK_FALSE(again.node.streams_known());
  CHECK(again.node.purges.empty());
}

TEST_CASE("node registry: a version above the latest pushed is rejected and counted") {
  NodeRegistry reg(kDownAfterNs);
  // It registers claiming version 9 while 5 is the latest pushed: it shows at version 0.
  auto r = reg.on_register(registration(Role::kLogin, "login1", 9), 1, 0, 5);
  CHECK(r.version == VersionTaken::kRejected);
  CHECK(r.node.version == 0);
  CHECK(reg.rejected(VersionSource::kRegister) == 1);
  NodeRecord& n = r.node;
  CHECK(reg.take_version(n, VersionSource::kHeartbeat, 6, 5) == VersionTaken::kRejected);
  CHECK(reg.take_version(n, VersionSource::kAck, 6, 5) == VersionTaken::kRejected);
  CHECK(reg.rejected(VersionSource::kHeartbeat) == 1);
  CHECK(reg.rejected(VersionSource::kAck) == 1);
  CHECK(n.version == 0);
  // The latest itself is taken; a lower one later (a heartbeat crossing an ack) does not lower it.
  CHECK(reg.take_version(n, VersionSource::kAck, 5, 5) == VersionTaken::kTaken);
  CHECK(reg.take_version(n, VersionSource::kHeartbeat, 4, 5) == VersionTaken::kTaken);
  CHECK(n.version == 5);
  // Rejections are logged at most once a second for a node.
  CHECK(NodeRegistry::log_rejection(n, 10 * kSecondNs));
  CHECK_FALSE(NodeRegistry::log_rejection(n, 10 * kSecondNs + kSecondNs / 2));
  CHECK(NodeRegistry::log_rejection(n, 11 * kSecondNs));
}

TEST_CASE("node registry: a node silent for the DOWN window is DOWN, and heard again it is up") {
  NodeRegistry reg(kDownAfterNs);
  reg.on_register(registration(Role::kHash, "hash1", 0), 1, 0, 0);
  reg.on_register(registration(Role::kLogin, "login1", 0), 2, 0, 0);
  NodeRecord& login = *reg.find(kLogin1);
  CHECK_FALSE(reg.on_heard(login, 2 * kSecondNs));
  CHECK(reg.mark_down(kDownAfterNs, 0).empty());  // exactly the window: not yet
  CHECK(reg.mark_down(kDownAfterNs + 1, 0) == std::vector<NodeKey>{kHash1});
  CHECK_FALSE(reg.find(kHash1)->up);
  CHECK(reg.mark_down(kDownAfterNs + 2, 0).empty());  // said once
  // A message on its old link: back from DOWN, to be treated as a node that registered again.
  CHECK(reg.on_heard(*reg.find(kHash1), 4 * kSecondNs));
  CHECK(reg.find(kHash1)->up);
  CHECK_FALSE(reg.on_heard(*reg.find(kHash1), 4 * kSecondNs + 1));
}

TEST_CASE("node registry: after the config server's loop stalled, the DOWN window starts again") {
  NodeRegistry reg(kDownAfterNs);
  reg.on_register(registration(Role::kHash, "hash1", 0), 1, 0, 0);
  // Ten seconds without a turn of the loop: what the node sent meanwhile is still unread.
  const int64_t resumed = 10 * kSecondNs;
  CHECK(reg.mark_down(resumed, resumed).empty());
  CHECK(reg.mark_down(resumed + kDownAfterNs, resumed).empty());
  CHECK(reg.mark_down(resumed + kDownAfterNs + 1, resumed) == std::vector<NodeKey>{kHash1});
}

TEST_CASE("node registry: a node behind the latest version for the DOWN window is LAGGING") {
  NodeRegistry reg(kDownAfterNs);
  reg.on_register(registration(Role::kHash, "hash1", 4), 1, 0, 4);
  reg.on_register(registration(Role::kLogin, "login1", 4), 2, 0, 4);
  NodeRecord& hash = *reg.find(kHash1);
  NodeRecord& login = *reg.find(kLogin1);
  // Version 5 is pushed to both at 1 s; the hash server acknowledges it, the login server never.
  reg.start_convergence(5, kSecondNs);
  NodeRegistry::on_pushed(hash, kSecondNs, 5);
  NodeRegistry::on_pushed(login, kSecondNs, 5);
  CHECK(reg.take_version(hash, VersionSource::kAck, 5, 5) == VersionTaken::kTaken);
  CHECK_FALSE(reg.check_convergence(2 * kSecondNs).has_value());  // the login server is waited for
  CHECK_FALSE(reg.converged(5));
  // It heartbeats (so it is not DOWN) but stays behind: LAGGING once the window has passed.
  reg.on_heard(login, 3 * kSecondNs);
  reg.on_heard(hash, 3 * kSecondNs);
  CHECK(reg.mark_lagging(kSecondNs + kDownAfterNs, 5).empty());
  CHECK(reg.mark_lagging(kSecondNs + kDownAfterNs + 1, 5) == std::vector<NodeKey>{kLogin1});
  CHECK(login.lagging);
  CHECK(reg.mark_lagging(kSecondNs + kDownAfterNs + 2, 5).empty());  // said once
  // Convergence no longer waits for it: reached, said once, timed from the change.
  CHECK(reg.converged(5));
  const auto ms = reg.check_convergence(kSecondNs + kDownAfterNs + 2);
  REQUIRE(ms.has_value());
  CHECK(*ms == doctest::Approx(3000.000002));
  CHECK_FALSE(reg.check_convergence(kSecondNs + kDownAfterNs + 3).has_value());
  CHECK(reg.convergence_ms() == ms);
  // A LAGGING node stays LAGGING through a new registration (reconnecting does not restart the
  // window), and catches up by acknowledging the version.
  reg.on_register(registration(Role::kLogin, "login1", 4), 3, 6 * kSecondNs, 5);
  CHECK(reg.find(kLogin1)->lagging);
  CHECK(reg.take_version(login, VersionSource::kHeartbeat, 5, 5) == VersionTaken::kCaughtUp);
  CHECK_FALSE(login.lagging);
  CHECK(login.behind_since_ns == 0);
}

TEST_CASE("node registry: a node first seen behind counts its LAGGING window from then") {
  NodeRegistry reg(kDownAfterNs);
  // No push reached it (it registered while a version was held back): seen behind at 5 s.
  reg.on_register(registration(Role::kHash, "hash1", 3), 1, 0, 5);
  CHECK(reg.mark_lagging(5 * kSecondNs, 5).empty());
  reg.on_heard(*reg.find(kHash1), 7 * kSecondNs);
  CHECK(reg.mark_lagging(5 * kSecondNs + kDownAfterNs, 5).empty());
  CHECK(reg.mark_lagging(5 * kSecondNs + kDownAfterNs + 1, 5) == std::vector<NodeKey>{kHash1});
  // A DOWN node is not LAGGING as well: it is waited for by nothing already.
  NodeRegistry other(kDownAfterNs);
  other.on_register(registration(Role::kHash, "hash1", 3), 1, 0, 5);
  CHECK(other.mark_down(kDownAfterNs + 1, 0).size() == 1);
  CHECK(other.mark_lagging(10 * kSecondNs, 5).empty());
  CHECK(other.converged(5));
}

TEST_CASE("node registry: requests per second from two heartbeats at least a second apart") {
  NodeRecord n;
  n.stats = {{"upserts", 100}, {"gets", 50}};
  NodeRegistry::update_rate(n, kSecondNs);
  CHECK(n.requests_per_s == 0);
  n.stats = {{"upserts", 300}, {"gets", 50}};
  NodeRegistry::update_rate(n, kSecondNs + kSecondNs / 2);  // the same sample period: not yet
  CHECK(n.requests_per_s == 0);
  n.stats = {{"upserts", 500}, {"gets", 150}};
  NodeRegistry::update_rate(n, 3 * kSecondNs);
  CHECK(n.requests_per_s == doctest::Approx(250.0));
  // A restarted node's counters start again from zero: no negative rate.
  n.stats = {{"received", 10}};
  NodeRegistry::update_rate(n, 5 * kSecondNs);
  CHECK(n.requests_per_s == doctest::Approx(250.0));
}
