// Records move with their ids (issue 13, docs/design.md §4): real config, hash and login servers on
// loopback. Users log in once and then stay silent, ids change owner (a range move, a server
// joining the ring, a drain), the old owner streams the records to the new one, the automatic
// purge deletes the old copies — and every user is still found, by a udp_sim that sends no LOGIN
// (--lookup-only). Also: LOGOUT racing LOOKUPs during a move, a server frozen past DOWN, and
// restarts of the config server and of the receiving server in the middle of a stream.
#include <doctest/doctest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "harness/config_cluster.h"
#include "harness/load_size.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"
#include "tests/integration/sim_runs.h"

using namespace imhash;
using namespace imhash::test;
namespace json = boost::json;

namespace {

// The first id of the second third of the id space: where range mode's even split puts hash2.
constexpr uint64_t kHash2First = 6148914691236517205ULL;

}  // namespace

TEST_CASE("streaming: 300k silent users (100k under ASan) survive a range move and its purge") {
  ConfigCluster c(ConfigClusterOptions{.shards = 2, .grace_ms = 2000});
  const uint16_t udp = c.start_serving(3);  // range mode: hash1 owns the first third of ids
  constexpr uint64_t kFirst = 1000000, kUsers = load_size(300000), kMoved = kUsers / 2;
  log_in(udp, kFirst, kUsers);
  REQUIRE(wait_until([&] { return c.records(1) == kUsers; }, kPatience, kPollInterval));

  // The first half (1000000-1149999 with 300k users) moves to hash2. Nobody looks them up or
  // heartbeats: only the stream can bring them there before the purge deletes hash1's copies.
  REQUIRE(c.imctl({"assign", std::to_string(kFirst) + "-" + std::to_string(kFirst + kMoved - 1),
                   "hash2"})
              .exit_code == 0);
  CHECK(wait_until([&] { return c.records(1) == kUsers - kMoved && c.records(2) == kMoved; },
                   kMovePatience, kPollInterval));
  CHECK(found(udp, kFirst, kUsers) == kUsers);
}

TEST_CASE(
    "streaming: a server joining the ring gets its ids, and a drained server hands all over") {
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 1000, .initial_mode = "ring"});
  const uint16_t udp = c.start_serving(2);
  constexpr uint64_t kFirst = 1, kUsers = load_size(60000);
  log_in(udp, kFirst, kUsers);
  REQUIRE(
      wait_until([&] { return c.records(1) + c.records(2) == kUsers; }, kPatience, kPollInterval));

  c.start_hash(3);
  REQUIRE(c.imctl({"server", "add", "hash3"}).exit_code == 0);
  // hash3 receives its share by streaming; the others' copies of it are purged.
  CHECK(wait_until(
      [&] { return c.records(3) > 0 && c.records(1) + c.records(2) + c.records(3) == kUsers; },
      kMovePatience, kPollInterval));
  CHECK(found(udp, kFirst, kUsers) == kUsers);

  // Drain hash1: everything it holds streams to hash2 and hash3; then it holds nothing.
  const ImctlResult drain = c.imctl({"drain", "hash1", "--wait", "--timeout", "120"});
  CHECK(drain.exit_code == 0);
  if (drain.exit_code != 0) MESSAGE(drain.out);
  CHECK(wait_until([&] { return c.records(1) == 0; }, kMovePatience, kPollInterval));
  // Not at once: the ring is Maglev's, so removing hash1 moves a few slots between hash2 and
  // hash3 too, and their old copies stay until the purge after the grace period (a run under
  // load counted 60,003 just after hash1 was empty).
  CHECK(
      wait_until([&] { return c.records(2) + c.records(3) == kUsers; }, kPatience, kPollInterval));
  CHECK(found(udp, kFirst, kUsers) == kUsers);
}

TEST_CASE("streaming: users logged out on one login server during a move stay logged out") {
  // hash1 streams slowly, so the LOGOUTs and LOOKUPs below run while the stream is under way:
  // streamed copies of logged-out users still arrive at hash2 after their LOGOUT, and LOOKUPs
  // through the other login server take the fallback read to hash1 and repair into hash2.
  ConfigCluster c(
      ConfigClusterOptions{.grace_ms = 4000, .hash_args = {{1, {"--stream-rate", "2000"}}}});
  const uint16_t udp1 = c.start_serving(3);
  const uint16_t udp2 = c.start_login(2, {"--timeout-ms", "1000"});
  REQUIRE(c.wait_converged(c.version(), 5));
  constexpr uint64_t kUsers = 20000, kLoggedOut = 4000;
  log_in(udp1, 1, kUsers);

  REQUIRE(c.imctl({"assign", "1-" + std::to_string(kUsers), "hash2"}).exit_code == 0);
  UdpClient one(udp1), two(udp2);
  for (uint64_t id = 1; id <= kLoggedOut; ++id) {
    const auto bye = one.call(UdpClient::make(client::Op::kLogout, id));
    REQUIRE(bye);
    CHECK(bye->status == client::Status::kOk);
    const auto seen = two.call(UdpClient::make(client::Op::kLookup, id));
    REQUIRE(seen);
    CHECK(seen->status != client::Status::kUnavailable);
  }
  // The stream ends, the purge runs: hash1 keeps nothing of 1..kUsers.
  CHECK(wait_until([&] { return c.records(1) == 0; }, kMovePatience, kPollInterval));
  size_t back = 0;
  for (uint64_t id = 1; id <= kLoggedOut; ++id) {
    for (UdpClient* via : {&one, &two}) {
      const auto r = via->call(UdpClient::make(client::Op::kLookup, id));
      REQUIRE(r);
      back += r->status != client::Status::kNotFound;
    }
  }
  CHECK(back == 0);
  CHECK(c.records(2) == kUsers - kLoggedOut);
  CHECK(found(udp1, kLoggedOut + 1, kUsers - kLoggedOut) == kUsers - kLoggedOut);
}

TEST_CASE("streaming: users who log out and back in while their ids are away come back with them") {
  // A range moves to hash2 and straight back. Its users logged out either before the first move
  // (hash1 deleted them as their owner) or during it (hash1 deleted the old copies), then logged
  // in again at hash2. When the range comes back, hash2's stream must bring them to hash1: a
  // delete hash1 remembered for the first move must not turn away the later login.
  ConfigCluster c(ConfigClusterOptions{.grace_ms = 1500});
  const uint16_t udp = c.start_serving(2);  // range mode: hash1 owns the first half of ids
  constexpr uint64_t kUsers = 1000, kFirstHalf = kUsers / 2;
  log_in(udp, 1, kUsers);
  UdpClient client(udp);
  auto log_out = [&](uint64_t first, uint64_t last) {
    for (uint64_t id = first; id <= last; ++id) {
      const auto bye = client.call(UdpClient::make(client::Op::kLogout, id));
      REQUIRE(bye);
      CHECK(bye->status == client::Status::kOk);
    }
  };
  log_out(kFirstHalf + 1, kUsers);  // at hash1, their owner
  const std::string range = "1-" + std::to_string(kUsers);
  REQUIRE(c.imctl({"assign", range, "hash2"}).exit_code == 0);
  log_out(1, kFirstHalf);  // during the move: the old copies at hash1 and the new ones at hash2
  log_in(udp, 1, kUsers);  // at hash2, the owner now
  REQUIRE(wait_until([&] { return c.records(1) == 0 && c.records(2) == kUsers; }, kMovePatience,
                     kPollInterval));

  REQUIRE(c.imctl({"assign", range, "hash1"}).exit_code == 0);
  CHECK(wait_until([&] { return c.records(1) == kUsers && c.records(2) == 0; }, kMovePatience,
                   kPollInterval));
  CHECK(found(udp, 1, kUsers) == kUsers);
}

TEST_CASE("streaming: a server frozen past DOWN and failed over purges everything when it wakes") {
  ConfigCluster c(ConfigClusterOptions{.failover = "auto"});
  const uint16_t udp = c.start_serving(3);
  constexpr uint64_t kUsers = 2000;
  log_in(udp, kHash2First, kUsers);  // all on hash2
  REQUIRE(wait_until([&] { return c.records(2) == kUsers; }, kPatience, kPollInterval));
  const uint64_t before = c.version();

  // SIGSTOP: hash2 stops heartbeating on a connection that stays open; it is DOWN and failed
  // over (a new version without it). SIGCONT: it speaks again on the same connection.
  ::kill(c.hash(2).pid(), SIGSTOP);
  const bool failed_over =
      wait_until([&] { return c.version() > before; }, kPatience, kPollInterval);
  ::kill(c.hash(2).pid(), SIGCONT);
  REQUIRE(failed_over);
  // Its records are stale (its ids went to others while it slept): it purges them all before it
  // can be added back, as it would after registering again.
  CHECK(wait_until([&] { return c.records(2) == 0; }, kPatience, kPollInterval));
  CHECK(wait_until(
      [&] {
        return c.imctl({"server", "add", "hash2"}).exit_code == 0;
      },
      kPatience, kPollInterval));
}

TEST_CASE("streaming: the config server, then the receiving server, restart in mid-stream") {
  ConfigCluster c(ConfigClusterOptions{
      .grace_ms = 1000,
      .hash_args = {{1, {"--stream-rate", "10000"}}, {2, {"--stream-rate", "10000"}}}});
  const uint16_t udp = c.start_serving(3);
  constexpr uint64_t kUsers = 30000;  // 3 s of streaming at --stream-rate 10000
  log_in(udp, 1, kUsers);
  REQUIRE(wait_until([&] { return c.records(1) == kUsers; }, kPatience, kPollInterval));

  // Move 1: the config server is killed while hash1 streams to hash2, and comes back: it still
  // knows the purge it owes (persisted) and runs it only once the stream is done.
  REQUIRE(c.imctl({"assign", "1-" + std::to_string(kUsers), "hash2"}).exit_code == 0);
  REQUIRE(wait_until([&] { return c.records(2) > 0; }, kPatience, kPollInterval));
  c.kill_config();
  c.start_config();
  CHECK(wait_until([&] { return c.records(1) == 0 && c.records(2) == kUsers; }, kMovePatience,
                   kPollInterval));
  CHECK(found(udp, 1, kUsers) == kUsers);

  // Move 2, back: hash2 streams to hash1; hash1 (the receiver) is killed once it has some, and
  // started again empty on the same address. hash2's link to it breaks, and it
  // sends everything again: nobody is lost.
  const std::string back = "1-" + std::to_string(kUsers);
  REQUIRE(c.imctl({"assign", back, "hash1"}).exit_code == 0);
  REQUIRE(wait_until([&] { return c.records(1) > 0; }, kPatience, kPollInterval));
  c.kill_hash(1);
  c.start_hash(1);
  CHECK(wait_until([&] { return c.records(2) == 0 && c.records(1) == kUsers; }, kMovePatience,
                   kPollInterval));
  CHECK(found(udp, 1, kUsers) == kUsers);
}

TEST_CASE("streaming: the source restarts in mid-stream, and the move still completes") {
  ConfigCluster c(
      ConfigClusterOptions{.grace_ms = 1000, .hash_args = {{1, {"--stream-rate", "10000"}}}});
  const uint16_t udp = c.start_serving(3);
  constexpr uint64_t kUsers = 30000;  // 3 s of streaming at --stream-rate 10000
  log_in(udp, 1, kUsers);
  REQUIRE(wait_until([&] { return c.records(1) == kUsers; }, kPatience, kPollInterval));

  REQUIRE(c.imctl({"assign", "1-" + std::to_string(kUsers), "hash2"}).exit_code == 0);
  REQUIRE(wait_until([&] { return c.records(2) > 0; }, kPatience, kPollInterval));
  // hash1 dies with the records it had not streamed yet (memory only: without replicas those
  // users are gone, as after any crash) and comes back empty on its address. Its new stream has
  // nothing to send: it is done at once, and the pending purge of hash1 goes ahead rather than
  // waiting for ever.
  c.kill_hash(1);
  c.start_hash(1);
  const auto no_pending = [&] {
    const json::value s = c.imctl_json({"status"});
    return s.as_object().at("pending_purges").as_array().empty();
  };
  CHECK(wait_until(no_pending, kMovePatience, kPollInterval));
  CHECK(c.records(1) == 0);
  // What hash2 received before the crash stays, and each of those users is found.
  const uint64_t kept = c.records(2);
  CHECK(kept > 0);
  CHECK(kept <= kUsers);
  CHECK(found(udp, 1, kUsers) == kept);
}
