// login_server end to end on loopback: real hash servers, the real login server, UDP clients.
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/integration/cluster.h"
#include "tests/integration/udp_client.h"

using namespace imhash;
using client::Op;
using client::Status;
using imhash::test::Cluster;
using imhash::test::ClusterOptions;
using imhash::test::UdpClient;

namespace {

Endpoint endpoint_of(uint64_t user) {
  return Endpoint::v4(0x0a000000u + static_cast<uint32_t>(user), static_cast<uint16_t>(user));
}

Status status_of(const std::optional<client::Message>& m) {
  REQUIRE(m.has_value());
  return m->status;
}

// kill(SIGSTOP) only queues the stop: wait (bounded) until every thread of `pid` is stopped.
bool wait_stopped(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    bool all = true;
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      std::ifstream stat(task.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') {
        all = false;
      }
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Polls (bounded: about 15 s, generous for a loaded CI machine) until `user` can log in again.
bool wait_until_served(UdpClient& c, uint64_t user) {
  for (int i = 0; i < 600; ++i) {
    auto r = c.call(UdpClient::make(Op::kLogin, user, endpoint_of(user)));
    if (r && r->status == Status::kOk) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

}  // namespace

TEST_CASE("login_server: every operation end to end") {
  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login();
  UdpClient c(cluster.udp_port());

  auto ping = c.call(UdpClient::make(Op::kPing, 0));
  REQUIRE(ping);
  CHECK(ping->status == Status::kOk);
  CHECK(ping->table_version == 1u);

  for (uint64_t user = 100; user < 130; ++user) {
    auto login = c.call(UdpClient::make(Op::kLogin, user, endpoint_of(user)));
    REQUIRE(login);
    CHECK(login->status == Status::kOk);
    CHECK(login->endpoint == endpoint_of(user));
  }
  for (uint64_t user = 100; user < 130; ++user) {
    auto look = c.call(UdpClient::make(Op::kLookup, user));
    REQUIRE(look);
    CHECK(look->status == Status::kOk);
    CHECK(look->endpoint == endpoint_of(user));
    CHECK(look->age.has_value());
  }
  // No ENDPOINT: the login server stores what it saw, and tells the client.
  auto observed = c.call(UdpClient::make(Op::kHeartbeat, 7));
  REQUIRE(observed);
  CHECK(observed->endpoint->family == 4);
  CHECK(observed->endpoint->v4_host_order() == 0x7f000001);
  CHECK(c.call(UdpClient::make(Op::kLookup, 7))->endpoint == observed->endpoint);

  CHECK(status_of(c.call(UdpClient::make(Op::kLogout, 100))) == Status::kOk);
  CHECK(status_of(c.call(UdpClient::make(Op::kLogout, 100))) == Status::kOk);  // idempotent
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 100))) == Status::kNotFound);
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 999999))) == Status::kNotFound);

  // Short and foreign datagrams get nothing back; a bad version gets a header-only answer.
  CHECK(c.call_raw(std::vector<uint8_t>(47, 0x49)).empty());
  CHECK(c.call_raw(std::vector<uint8_t>(100, 0)).empty());
  std::vector<uint8_t> v9(48, 0);
  v9[0] = 0x49, v9[1] = 0x48, v9[2] = 9, v9[3] = 5, v9[19] = 28;
  auto reply = c.call_raw(v9);
  REQUIRE(reply.size() == client::kHeaderSize);
  CHECK(reply[16] == static_cast<uint8_t>(Status::kUnsupportedVersion));

  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE("login_server: a dead hash server costs only its own ids, and service returns") {
  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login();
  UdpClient c(cluster.udp_port());
  // Identity modulo over 3 servers: user u lives on hash server u % 3.
  for (uint64_t user = 300; user < 330; ++user) {
    REQUIRE(status_of(c.call(UdpClient::make(Op::kLogin, user, endpoint_of(user)))) == Status::kOk);
  }
  cluster.kill_hash(1);
  // The links see the reset at once: ids of hash2 get UNAVAILABLE (never a hang or TIMEOUT),
  // the others are unaffected.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (uint64_t user = 300; user < 330; ++user) {
    auto r = c.call(UdpClient::make(Op::kLookup, user));
    REQUIRE(r);
    if (user % 3 == 1) {
      CHECK(r->status == Status::kUnavailable);
    } else {
      CHECK(r->status == Status::kOk);
      CHECK(r->endpoint == endpoint_of(user));
    }
  }
  cluster.restart_hash(1);
  CHECK(wait_until_served(c, 301));  // reconnected with back-off, nothing else restarted
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 301))) == Status::kOk);
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 300))) == Status::kOk);
  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE("login_server: a frozen hash server times out, is marked down, and is probed back") {
  Cluster cluster(ClusterOptions{.hash_servers = 2, .shards = 1, .login_threads = 1});
  cluster.write_table(1, {0, 1});
  cluster.start_login();
  UdpClient c(cluster.udp_port());
  REQUIRE(status_of(c.call(UdpClient::make(Op::kLogin, 11, endpoint_of(11)))) == Status::kOk);
  kill(cluster.hash(1).pid(), SIGSTOP);  // no reset, no answer: like a cut cable
  REQUIRE(wait_stopped(cluster.hash(1).pid()));
  // Requests time out; once the link has been silent for --dead-after-ms (default 1 s) it is
  // marked down and its ids fail at once. Bounded: 100 lookups of at most ~0.2 s each.
  std::vector<Status> seen;
  for (int i = 0; i < 100 && (seen.empty() || seen.back() != Status::kUnavailable); ++i) {
    seen.push_back(status_of(c.call(UdpClient::make(Op::kLookup, 11))));
  }
  CHECK(seen.front() == Status::kTimeout);
  CHECK(seen.back() == Status::kUnavailable);
  // Ids of the healthy server are untouched.
  REQUIRE(status_of(c.call(UdpClient::make(Op::kLogin, 10, endpoint_of(10)))) == Status::kOk);
  kill(cluster.hash(1).pid(), SIGCONT);
  CHECK(wait_until_served(c, 11));
  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE("login_server: MOVED from a hash server with a newer table makes it catch up") {
  Cluster cluster(ClusterOptions{.hash_servers = 2, .shards = 1, .login_threads = 2});
  // Version 1: both servers. The login server starts with it.
  cluster.write_table(1, {0, 1});
  cluster.start_login();
  UdpClient c(cluster.udp_port());
  // Version 2 gives every id to hash1. Hash2 learns it first (restarted with the new table); the
  // login server has not been told (no SIGHUP), as if it had missed a push.
  cluster.write_table(2, {0});
  cluster.kill_hash(1);
  test::ChildProcess hash2(IMHASH_HASH_SERVER,
                           {"--listen", cluster.hash_address(1), "--name", "hash2", "--shards", "1",
                            "--table", cluster.options().table_file});
  hash2.wait_listening();
  // Id 1 belongs to hash2 under version 1: hash2 answers MOVED(2), the login server reads the newer
  // table and retries at hash1.
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    auto r = c.call(UdpClient::make(Op::kLogin, 1, endpoint_of(1)));
    served = r && r->status == Status::kOk;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  CHECK(served);
  auto ping = c.call(UdpClient::make(Op::kPing, 0));
  REQUIRE(ping);
  CHECK(ping->table_version == 2u);
  auto look = c.call(UdpClient::make(Op::kLookup, 1));
  REQUIRE(look);
  CHECK(look->status == Status::kOk);
  CHECK(look->endpoint == endpoint_of(1));
  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE("login_server: bad flags and tables fail with clear exit codes") {
  test::ChildProcess no_table(IMHASH_LOGIN_SERVER, {"--udp", "127.0.0.1:0"});
  CHECK(no_table.stop(0) == 64);
  test::ChildProcess missing(IMHASH_LOGIN_SERVER, {"--table", "/nonexistent.json"});
  CHECK(missing.stop(0) == 78);
  test::ChildProcess bad_threads(IMHASH_LOGIN_SERVER, {"--threads", "0", "--table", "x"});
  CHECK(bad_threads.stop(0) == 64);
  test::ChildProcess bad_poll(IMHASH_LOGIN_SERVER, {"--idle-poll-us", "100001", "--table", "x"});
  CHECK(bad_poll.stop(0) == 64);
}

TEST_CASE("login_server: udp_sim --verify passes with 100k users over 3 hash servers") {
  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login();
  test::ChildProcess sim(IMHASH_UDP_SIM,
                         {"--target", "127.0.0.1:" + std::to_string(cluster.udp_port()), "--users",
                          "100000", "--duration", "6", "--verify", "--log-level", "warn"});
  const std::string summary = sim.wait_for_line("verify:", std::chrono::seconds(60));
  CHECK(summary.find("verify: pass") != std::string::npos);
  CHECK(sim.stop(0, std::chrono::seconds(30)) == 0);
  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE(
    "login_server: after a table change, missed lookups are read at the old owner and repaired") {
  Cluster cluster(ClusterOptions{.hash_servers = 3, .shards = 1, .login_threads = 1});
  cluster.write_table(1, {0, 1});  // user u on hash server u % 2
  cluster.start_login({"--grace-ms", "60000"});
  UdpClient c(cluster.udp_port());
  for (uint64_t user = 600; user < 660; ++user) {
    REQUIRE(status_of(c.call(UdpClient::make(Op::kLogin, user, endpoint_of(user)))) == Status::kOk);
  }
  cluster.write_table(2, {0, 1, 2});  // now u % 3: most users have a new owner holding nothing
  kill(cluster.login().pid(), SIGHUP);
  for (int i = 0; i < 200; ++i) {
    auto ping = c.call(UdpClient::make(Op::kPing, 0));
    if (ping && ping->table_version == 2u) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (uint64_t user = 600; user < 660; ++user) {
    auto r = c.call(UdpClient::make(Op::kLookup, user));
    REQUIRE(r);
    CHECK(r->status == Status::kOk);  // never reported missing during the move
    CHECK(r->endpoint == endpoint_of(user));
  }
  // The fallback hits were copied to their new owners: with the old owners gone, still found.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cluster.kill_hash(1);
  for (uint64_t user = 600; user < 660; ++user) {
    if (user % 3 == 1) continue;  // owned by the server just killed
    auto r = c.call(UdpClient::make(Op::kLookup, user));
    REQUIRE(r);
    CHECK(r->status == Status::kOk);
  }
  CHECK(cluster.login().stop(SIGTERM) == 0);
}
