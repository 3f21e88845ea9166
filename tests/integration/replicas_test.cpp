// Replicas (issue 14, docs/design.md §3 "Replicas"): real config, hash and login servers on
// loopback with every record on two hash servers. A hash server killed with -9 costs no lookup:
// the login server reads the next replica in the same request, and writes made while it is down
// land on the others. Turning replicas on copies every record to its new replica by streaming, and
// the purge that follows a table change keeps the replicas' copies.
#include <doctest/doctest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness/config_cluster.h"
#include "harness/load_size.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"
#include "tests/integration/sim_runs.h"

using namespace imhash;
using namespace imhash::test;

namespace {

uint64_t total_records(ConfigCluster& c, int servers) {
  uint64_t n = 0;
  for (int i = 1; i <= servers; ++i) n += c.records(i);
  return n;
}

// Three hash servers with two copies of each record, and `users` users (from 1) logged in, each
// stored twice; returns the login server's UDP port.
uint16_t serve_with_two_copies(ConfigCluster& c, uint64_t users) {
  const uint16_t udp = c.start_serving(3);
  REQUIRE(c.imctl({"replicas", "2"}).exit_code == 0);
  REQUIRE(c.wait_converged(c.version(), 4));
  log_in(udp, 1, users);
  REQUIRE(wait_until([&] { return total_records(c, 3) == 2 * users; }, kPatience, kPollInterval));
  return udp;
}

// How many of the users first..last, who logged out, a LOOKUP still finds (or gets no NOT_FOUND
// for).
size_t not_logged_out(UdpClient& client, uint64_t first, uint64_t last) {
  size_t n = 0;
  for (uint64_t id = first; id <= last; ++id) {
    const auto r = client.call(UdpClient::make(client::Op::kLookup, id));
    REQUIRE(r);
    n += r->status != client::Status::kNotFound;
  }
  return n;
}

// No purge of old copies is still owed: every stream is done and every purge was sent.
bool no_purge_pending(ConfigCluster& c) {
  const boost::json::value status = c.imctl_json({"status"});
  const auto* list = status.as_object().if_contains("pending_purges");
  return !list || list->as_array().empty();
}

}  // namespace

TEST_CASE(
    "replicas: with two copies a hash server killed with -9 costs no lookup, login or logout") {
  ConfigCluster c(ConfigClusterOptions{.shards = 2, .grace_ms = 1000, .initial_mode = "ring"});
  constexpr uint64_t kUsers = load_size(30000);
  const uint16_t udp = serve_with_two_copies(c, kUsers);
  const uint64_t held_by_2 = c.records(2);
  REQUIRE(held_by_2 > kUsers / 3);

  c.kill_hash(2);
  CHECK(found(udp, 1, kUsers) == kUsers);
  // Users whose owner is the dead server log in (the write lands on the replica) and are found.
  constexpr uint64_t kLate = 1000000, kLateUsers = 3000;
  log_in(udp, kLate, kLateUsers);
  // And some log out while it is down: they stay logged out.
  UdpClient client(udp);
  constexpr uint64_t kLoggedOut = 500;
  for (uint64_t id = 1; id <= kLoggedOut; ++id) {
    const auto bye = client.call(UdpClient::make(client::Op::kLogout, id));
    REQUIRE(bye);
    CHECK(bye->status == client::Status::kOk);
  }
  CHECK(not_logged_out(client, 1, kLoggedOut) == 0);
  CHECK(found(udp, kLoggedOut + 1, kUsers - kLoggedOut) == kUsers - kLoggedOut);
  CHECK(found(udp, kLate, kLateUsers) == kLateUsers);
}

TEST_CASE("replicas: turning them on copies every record, and a new server gets its copies") {
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 1000, .initial_mode = "ring"});
  const uint16_t udp = c.start_serving(3);
  constexpr uint64_t kUsers = load_size(40000);
  log_in(udp, 1, kUsers);
  REQUIRE(wait_until([&] { return total_records(c, 3) == kUsers; }, kPatience, kPollInterval));

  // One copy to two: every server streams each record to its new replica.
  REQUIRE(c.imctl({"replicas", "2"}).exit_code == 0);
  CHECK(wait_until([&] { return no_purge_pending(c) && total_records(c, 3) == 2 * kUsers; },
                   kMovePatience, kPollInterval));

  // A fourth server joins the ring: it receives its share of both copies by streaming, and the
  // purges leave exactly two copies of each record.
  c.start_hash(4);
  REQUIRE(c.imctl({"server", "add", "hash4"}).exit_code == 0);
  CHECK(wait_until(
      [&] { return no_purge_pending(c) && c.records(4) > 0 && total_records(c, 4) == 2 * kUsers; },
      kMovePatience, kPollInterval));
  CHECK(found(udp, 1, kUsers) == kUsers);

  // Any one server can now die without a user going missing.
  c.kill_hash(1);
  CHECK(found(udp, 1, kUsers) == kUsers);
}

TEST_CASE("replicas: a server back empty is refilled, and a LOGOUT while it was away stays") {
  // The others stream slowly, so the lookups below run while the refill is under way.
  ConfigCluster c(ConfigClusterOptions{
      .shards = 2,
      .grace_ms = 1000,
      .initial_mode = "ring",
      .hash_args = {{1, {"--stream-rate", "4000"}}, {3, {"--stream-rate", "4000"}}}});
  constexpr uint64_t kUsers = 20000, kLoggedOut = 500;
  const uint16_t udp = serve_with_two_copies(c, kUsers);

  c.kill_hash(2);
  UdpClient client(udp);
  for (uint64_t id = 1; id <= kLoggedOut; ++id) {
    const auto bye = client.call(UdpClient::make(client::Op::kLogout, id));
    REQUIRE(bye);
    CHECK(bye->status == client::Status::kOk);
  }
  // Back empty, on the same address: until the others have streamed to it (and the login server
  // has sent what it held for it), its lookups are read from another copy.
  c.start_hash(2);
  CHECK(found(udp, kLoggedOut + 1, kUsers - kLoggedOut) == kUsers - kLoggedOut);
  CHECK(not_logged_out(client, 1, kLoggedOut) == 0);
  // The refill ends, and the records are where they were: two copies of each.
  CHECK(wait_until(
      [&] {
        const auto status = c.imctl_json({"status"});
        const auto* refills = status.as_object().if_contains("refills");
        return refills && refills->as_array().empty() &&
               total_records(c, 3) == 2 * (kUsers - kLoggedOut);
      },
      kMovePatience, kPollInterval));
  // So the refilled server now answers for the others: kill one of them.
  c.kill_hash(1);
  CHECK(found(udp, kLoggedOut + 1, kUsers - kLoggedOut) == kUsers - kLoggedOut);
  CHECK(not_logged_out(client, 1, kLoggedOut) == 0);
}

TEST_CASE("replicas: under a verified load a kill -9 and a restart empty fail no lookup") {
  ConfigCluster c(ConfigClusterOptions{.shards = 2, .grace_ms = 1000, .initial_mode = "ring"});
  const uint16_t udp = c.start_serving(3);
  REQUIRE(c.imctl({"replicas", "2"}).exit_code == 0);
  REQUIRE(c.wait_converged(c.version(), 4));
  auto sim = start_load(udp, 1, 3000, 2000, 12);
  const auto served_more = [&](uint64_t n) {
    const uint64_t from = c.gets_served();
    return wait_until([&] { return c.gets_served() >= from + n; }, kPatience, kPollInterval);
  };
  REQUIRE(served_more(2000));
  c.kill_hash(2);
  CHECK(served_more(2000));  // lookups go on while it is down
  c.start_hash(2);
  CHECK(served_more(2000));  // and while it is refilled, and after
  check_load(*sim);
}

TEST_CASE("replicas: with failover on, a killed server's ids move to the others, none is lost") {
  ConfigCluster c(ConfigClusterOptions{
      .shards = 2, .grace_ms = 1000, .failover = "auto", .initial_mode = "ring"});
  constexpr uint64_t kUsers = 20000;
  const uint16_t udp = serve_with_two_copies(c, kUsers);
  const uint64_t before = c.version();
  // Other users come and go meanwhile (their own ids, so the count of the silent ones holds).
  auto sim = start_load(udp, 1000000, 3000, 2000, 10);
  c.kill_hash(2);
  // DOWN, then a version without it: the survivors stream each other the copies it held.
  CHECK(wait_until([&] { return c.version() > before; }, kPatience, kPollInterval));
  // Right after that version both survivors stream and purge: under ASan on a loaded machine a
  // lookup may miss the login server's deadline (TIMEOUT), which loses nothing.
  CHECK(kept(udp, 1, kUsers) == kUsers);
  check_load(*sim);
  // (hash2's own purge waits for it to come back: it is DOWN.)
  CHECK(wait_until([&] { return c.held(1, 1, kUsers) == kUsers && c.held(3, 1, kUsers) == kUsers; },
                   kMovePatience, kPollInterval));
  // Two servers, each with a copy of everything: either one alone answers for every user.
  c.kill_hash(1);
  CHECK(kept(udp, 1, kUsers) == kUsers);
}

TEST_CASE("replicas: a member frozen with SIGSTOP costs no request a TIMEOUT or UNAVAILABLE") {
  // Issue 33: frozen, hash2 keeps its connections open and answers nothing. Each read and write it
  // does not answer within --hedge-ms (half the deadline) goes on to the next member of its set,
  // whose answer the client gets within the same deadline; once hash2's links are marked down,
  // its requests go straight to the next member and its writes are held for it.
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 1000, .initial_mode = "ring"});
  const uint16_t udp = c.start_serving(3);
  REQUIRE(c.imctl({"replicas", "2"}).exit_code == 0);
  REQUIRE(c.wait_converged(c.version(), 4));
  constexpr uint64_t kUsers = 5000;
  log_in(udp, 1, kUsers);
  auto sim = start_load(udp, 100000, 3000, 2000, 8);
  const uint64_t from = c.gets_served();
  REQUIRE(wait_until([&] { return c.gets_served() >= from + 2000; }, kPatience, kPollInterval));
  ::kill(c.hash(2).pid(), SIGSTOP);
  const uint64_t got = found(udp, 1, kUsers);  // the silent users, each read once meanwhile
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the fault's length, not a wait
  ::kill(c.hash(2).pid(), SIGCONT);
  CHECK(got == kUsers);
  const UdpSimSummary s = summary_of(*sim);
  CHECK(s.verify.result == "pass");
  for (const std::string op : {"LOGIN", "HEARTBEAT", "LOOKUP", "LOGOUT"}) {
    CAPTURE(op);
    CHECK(s.op(op).count("TIMEOUT") == 0);
    CHECK(s.op(op).count("UNAVAILABLE") == 0);
    CHECK(s.op(op).no_reply == 0);
  }
  CHECK(s.op("HEARTBEAT").requests > 1000);
  sim->stop(0);
}

namespace {

// imctl status's hash server `name` and the login server's writes held for it (-1: not listed).
struct LagView {
  int64_t lag = -1;
  int64_t held_at_login = -1;
};
LagView lag_of(ConfigCluster& c, const std::string& name) {
  LagView v;
  const boost::json::value status = c.imctl_json({"status"});
  for (const auto& node : status.at("nodes").as_array()) {
    const auto& n = node.as_object();
    if (n.at("role").as_string() == "hash" && n.at("name").as_string() == name) {
      v.lag = n.at("replication_lag").to_number<int64_t>();
    }
    if (n.at("role").as_string() == "login") {
      if (const auto* held = n.if_contains("held_writes")) {
        if (const auto* count = held->as_object().if_contains(name))
          v.held_at_login = count->to_number<int64_t>();
      }
    }
  }
  return v;
}

}  // namespace

TEST_CASE("replicas: imctl status shows the writes held for a server away, and its refill") {
  // The others stream slowly (a scan step cuts up to 4096 slots' records at once, then waits for
  // the rate), so the refill is seen under way.
  ConfigCluster c(ConfigClusterOptions{
      .shards = 2,
      .grace_ms = 1000,
      .initial_mode = "ring",
      .hash_args = {{1, {"--stream-rate", "4000"}}, {3, {"--stream-rate", "4000"}}}});
  constexpr uint64_t kUsers = 20000;
  const uint16_t udp = serve_with_two_copies(c, kUsers);
  CHECK(lag_of(c, "hash2").lag == 0);

  c.kill_hash(2);
  log_in(udp, 1, kUsers);  // each of hash2's users writes again: held for it
  LagView away;
  CHECK(wait_until(
      [&] {
        away = lag_of(c, "hash2");
        return away.lag > 0;
      },
      kPatience, kPollInterval));
  CHECK(away.held_at_login == away.lag);            // one login server holds all of it
  CHECK(away.lag <= static_cast<int64_t>(kUsers));  // the latest write of each user only

  c.start_hash(2);
  // Under way: how far the peers' scans are, and how many records they have delivered.
  boost::json::object refill;
  CHECK(wait_until(
      [&] {
        const auto status = c.imctl_json({"status"});
        const auto& refills = status.at("refills").as_array();
        if (refills.empty()) return false;
        refill = refills.at(0).as_object();
        return refill.at("records_sent").to_number<uint64_t>() > 0;
      },
      kMovePatience, std::chrono::milliseconds(20)));
  if (!refill.empty()) {
    CHECK(refill.at("server").as_string() == "hash2");
    const double progress = refill.at("progress").to_number<double>();
    CHECK(progress >= 0.0);
    CHECK(progress <= 1.0);
  }
  // Back: the held writes went to it, and the refill ends.
  CHECK(wait_until(
      [&] {
        const auto status = c.imctl_json({"status"});
        return status.at("refills").as_array().empty() && lag_of(c, "hash2").lag == 0;
      },
      kMovePatience, kPollInterval));
  CHECK(found(udp, 1, kUsers) == kUsers);
}
