// Restarts without the config server: login and hash servers keep the last table they ran in
// their --state-dir, serve it when they start while no config server answers, and catch up with a
// newer version when one does (docs/operations.md §2, "When the config server is down").
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/routing/table_json.h"
#include "harness/config_cluster.h"
#include "harness/frame_client.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"
#include "tests/integration/answers.h"

using namespace imhash;
using namespace imhash::test;

namespace {

// A state directory of the test's own, removed afterwards.
struct StateDir {
  explicit StateDir(const std::string& name) : path(name + "." + std::to_string(getpid())) {
    std::filesystem::remove_all(path);
  }
  ~StateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

// The version of the table saved in `file`, 0 if there is none (yet).
uint64_t saved_version(const std::string& file) {
  if (!std::filesystem::exists(file)) return 0;
  const TableResult t = load_table_file(file);
  return t.table ? t.table->version : 0;
}

}  // namespace

TEST_CASE(
    "restart: a login server restarted while the config server is down serves its saved "
    "table, then converges to the config server's newer version") {
  StateDir state("restart_login_state");
  const std::string saved = state.path + "/login-login1.table.json";
  ConfigCluster c;
  c.start_config();
  c.start_hash(1);
  c.start_hash(2);
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2"}).exit_code == 0);  // version 1
  uint16_t udp = c.start_login(1, {"--state-dir", state.path});
  REQUIRE(c.wait_converged(1, 3));
  {
    UdpClient client(udp);
    for (uint64_t user = 1; user <= 20; ++user) {
      const auto r = client.call(UdpClient::make(client::Op::kLogin, user, endpoint_of(user)));
      REQUIRE(r);
      CHECK(r->status == client::Status::kOk);
    }
  }
  CHECK(saved_version(saved) == 1);

  // (a) The config server goes down, and the login server restarts meanwhile.
  c.kill_config();
  CHECK(c.login(1).stop(SIGTERM) == 0);
  udp = c.start_login(1, {"--state-dir", state.path});
  {
    UdpClient client(udp);
    const auto ping = client.call(UdpClient::make(client::Op::kPing, 0));
    REQUIRE(ping);
    CHECK(ping->status == client::Status::kOk);
    CHECK(ping->table_version == 1u);
    for (uint64_t user = 1; user <= 20; ++user) {
      const auto r = client.call(UdpClient::make(client::Op::kLookup, user));
      REQUIRE(r);
      CHECK(r->status == client::Status::kOk);
      CHECK(r->endpoint == endpoint_of(user));
    }
  }

  // (b) The config server comes back (same state) and makes a newer version: the login server
  // reconnects, takes it, serves it and saves it.
  c.start_config();
  REQUIRE(c.imctl({"assign", "1-1000", "hash2"}).exit_code == 0);  // version 2
  CHECK(c.wait_converged(2, 3));
  UdpClient client(udp);
  CHECK(wait_until([&] {
    const auto ping = client.call(UdpClient::make(client::Op::kPing, 0));
    return ping && ping->table_version == 2u;
  }));
  CHECK(wait_until([&] { return saved_version(saved) == 2; }));
  // Ids 1..1000 now live on hash2; the login server sends them there (a write, then a read).
  auto r = client.call(UdpClient::make(client::Op::kLogin, 7, endpoint_of(7)));
  REQUIRE(r);
  CHECK(r->status == client::Status::kOk);
  r = client.call(UdpClient::make(client::Op::kLookup, 7));
  REQUIRE(r);
  CHECK(r->status == client::Status::kOk);
}

TEST_CASE("restart: a saved table older than the config server's is replaced, never the reverse") {
  StateDir state("restart_order_state");
  const std::string saved = state.path + "/login-login1.table.json";
  ConfigCluster c;
  c.start_config();
  c.start_hash(1);
  REQUIRE(c.imctl({"server", "add", "hash1"}).exit_code == 0);  // version 1
  uint16_t udp = c.start_login(1, {"--state-dir", state.path});
  REQUIRE(c.wait_converged(1, 2));
  CHECK(c.login(1).stop(SIGTERM) == 0);
  // While login1 is stopped the table moves on twice; at its start it registers with version 1
  // (its saved table) and is brought to 3 before it announces.
  c.start_hash(2);
  REQUIRE(c.imctl({"server", "add", "hash2"}).exit_code == 0);
  REQUIRE(c.imctl({"assign", "1-1000", "hash2"}).exit_code == 0);
  REQUIRE(c.version() == 3);
  udp = c.start_login(1, {"--state-dir", state.path});
  UdpClient client(udp);
  const auto ping = client.call(UdpClient::make(client::Op::kPing, 0));
  REQUIRE(ping);
  CHECK(ping->table_version == 3u);
  CHECK(wait_until([&] { return saved_version(saved) == 3; }));
  CHECK(c.wait_converged(3, 3));
}

TEST_CASE("restart: a hash server restarted without a config server starts from its saved table") {
  StateDir state("restart_hash_state");
  ConfigCluster c;
  c.start_config();
  c.start_hash(1);
  c.start_hash(2);
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2"}).exit_code == 0);  // version 1
  REQUIRE(c.wait_converged(1, 2));
  // hash1 again, started by the test with a state directory: it takes version 1 and saves it.
  c.kill_hash(1);
  ChildProcess hash3(IMHASH_HASH_SERVER,
                     {"--name", "hash1", "--shards", "1", "--listen", "127.0.0.1:0", "--config",
                      c.config_address(), "--state-dir", state.path});
  hash3.wait_listening();
  const std::string saved = state.path + "/hash-hash1.table.json";
  REQUIRE(wait_until([&] { return saved_version(saved) == 1; }));
  CHECK(hash3.stop(SIGTERM) == 0);
  c.kill_config();
  ChildProcess again(IMHASH_HASH_SERVER,
                     {"--name", "hash1", "--shards", "1", "--listen", "127.0.0.1:0", "--config",
                      c.config_address(), "--state-dir", state.path});
  const uint16_t port = port_of(again.wait_listening().at(0));
  // Its handshake reports the saved version, with no config server to have pushed it.
  CHECK(FrameClient(port, 0).hello().table_version == 1);
  // Back with a newer version, the config server brings it.
  c.start_config();
  REQUIRE(c.imctl({"assign", "1-1000", "hash2"}).exit_code == 0);  // version 2
  CHECK(wait_until([&] { return FrameClient(port, 0).hello().table_version == 2; }));
  CHECK(wait_until([&] { return saved_version(saved) == 2; }));
}
