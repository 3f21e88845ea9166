// Addresses across hosts: what a hash server advertises (--advertise), the refusal of an address
// nobody can dial (at start-up, and by the config server), several config server addresses, and
// `imctl server set` changing a server's address in place without moving any id.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/routing/control_protocol.h"
#include "harness/config_cluster.h"
#include "harness/loopback.h"
#include "harness/tcp_proxy.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"

using namespace imhash;
using namespace imhash::test;
namespace json = boost::json;

namespace {

// Runs a program that must refuse its flags; returns its exit status and the line saying why (the
// first on stderr; the only other one is the pointer to --help).
std::pair<int, std::string> refused(const char* program, std::vector<std::string> args) {
  const std::string log = "addresses_refused." + std::to_string(getpid()) + ".log";
  ChildProcess p(program, std::move(args), {.stderr_log = log});
  p.read_all();
  const int code = p.stop(0);
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  std::remove(log.c_str());
  REQUIRE(lines.size() == 2);  // one clear line, and where to read more
  CHECK(lines[1].find("--help") != std::string::npos);
  return {code, lines[0]};
}

// The address `name` registered, as imctl status shows it ("" if it is not there).
std::string registered_address(ConfigCluster& c, const std::string& role, const std::string& name) {
  const json::value status = c.imctl_json({"status"});  // kept alive for the loop
  for (const auto& n : status.as_object().at("nodes").as_array()) {
    const auto& o = n.as_object();
    if (o.at("role").as_string() == role && o.at("name").as_string() == name) {
      return std::string(o.at("address").as_string());
    }
  }
  return "";
}

// A loopback port where nothing listens.
uint16_t dead_port() {
  uint16_t port = 0;
  const int fd = bind_loopback(SOCK_STREAM | SOCK_CLOEXEC, port);
  REQUIRE(fd >= 0);
  close(fd);
  return port;
}

}  // namespace

TEST_CASE("addresses: a hash server refuses at start-up to advertise an unspecified address") {
  const std::string config = "127.0.0.1:" + std::to_string(dead_port());
  auto [code, line] = refused(IMHASH_HASH_SERVER, {"--listen", "0.0.0.0:0", "--config", config});
  CHECK(code == 64);
  CHECK(line.find("--listen 0.0.0.0:0 binds every address but is none to dial: give --advertise "
                  "HOST:PORT") != std::string::npos);
  std::tie(code, line) = refused(IMHASH_HASH_SERVER, {"--listen", "[::]:0", "--config", config});
  CHECK(code == 64);
  std::tie(code, line) =
      refused(IMHASH_HASH_SERVER, {"--advertise", "0.0.0.0:7001", "--config", config});
  CHECK(code == 64);
  CHECK(line.find("--advertise 0.0.0.0:7001: an unspecified address") != std::string::npos);
  std::tie(code, line) =
      refused(IMHASH_LOGIN_SERVER, {"--advertise", "[::]:9000", "--config", config});
  CHECK(code == 64);
  std::tie(code, line) = refused(IMHASH_HASH_SERVER, {"--config", config + "," + config});
  CHECK(code == 64);
  CHECK(line.find("is listed twice") != std::string::npos);
  std::tie(code, line) =
      refused(IMHASH_LOGIN_SERVER, {"--config", config + ",", "--udp", "127.0.0.1:0"});
  CHECK(code == 64);
}

TEST_CASE(
    "addresses: the config server refuses a hash server registering an unspecified "
    "address, and says why") {
  ConfigCluster c;
  c.start_config();
  // What an old or misconfigured node would send; our own refuse before they get here.
  const int fd = connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, port_of(c.config_address()));
  REQUIRE(fd >= 0);
  std::vector<uint8_t> out;
  control::append_message(
      control::Register{Role::kHash, "hash9", "0.0.0.0:7001", 1, 0, 1, false, false}, out);
  REQUIRE(write(fd, out.data(), out.size()) == static_cast<ssize_t>(out.size()));
  std::vector<uint8_t> in;
  uint8_t buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) in.insert(in.end(), buf, buf + n);
  close(fd);  // read() returned 0: the config server closed the link after its answer
  control::Message m;
  size_t used = 0;
  std::string error;
  REQUIRE(control::next_message(in, m, used, error) == control::DecodeStatus::kOk);
  const auto* refusal = std::get_if<control::Refused>(&m);
  REQUIRE(refusal);
  CHECK(refusal->reason ==
        "hash server hash9 registered 0.0.0.0:7001, an unspecified address login servers cannot "
        "dial; start it with --advertise HOST:PORT (the address login servers reach it at)");
  CHECK(used == in.size());                               // nothing after it
  CHECK(registered_address(c, "hash", "hash9").empty());  // never in the registry
}

TEST_CASE(
    "addresses: --advertise is what the table gets and what login servers dial, "
    "several --config addresses are tried in turn") {
  ConfigCluster c;
  c.start_config();
  c.start_hash(2);
  // hash1 listens on one port but is reached through another (a proxy, as a NAT or a load
  // balancer would stand between hosts); its first config server address is dead.
  const std::string config_list =
      "127.0.0.1:" + std::to_string(dead_port()) + "," + c.config_address();
  const uint16_t real_port = dead_port();  // free now; hash1 listens there
  TcpProxy proxy(real_port);
  const std::string advertised = "127.0.0.1:" + std::to_string(proxy.port());
  ChildProcess hash1(IMHASH_HASH_SERVER,
                     {"--listen", "127.0.0.1:" + std::to_string(real_port), "--name", "hash1",
                      "--shards", "1", "--config", config_list, "--advertise", advertised});
  hash1.wait_listening();
  CHECK(wait_until([&] { return registered_address(c, "hash", "hash1") == advertised; }));
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2"}).exit_code == 0);
  const json::value table = c.imctl_json({"table"});
  const auto& servers = table.as_object().at("servers").as_array();
  CHECK(servers.at(0).as_object().at("address").as_string() == advertised);

  const uint16_t udp = c.start_login(1, {"--advertise", "192.0.2.1:0"});
  CHECK(wait_until([&] {
    return registered_address(c, "login", "login1") == "192.0.2.1:" + std::to_string(udp);
  }));
  REQUIRE(c.wait_converged(1, 3));
  UdpClient client(udp);
  int ok = 0;
  for (uint64_t user = 1; user <= 50; ++user) {  // both servers own some of these
    const auto r =
        client.call(UdpClient::make(client::Op::kLogin, user, Endpoint::v4(0x0a000001, 1)));
    ok += r && r->status == client::Status::kOk;
  }
  CHECK(ok == 50);  // hash1's users went through the advertised address
}

TEST_CASE("addresses: imctl server set changes an address in place, no id moves") {
  ConfigCluster c;
  c.start_config();
  for (int i = 1; i <= 3; ++i) c.start_hash(i);
  REQUIRE(c.imctl({"server", "add", "hash1", "hash2", "hash3"}).exit_code == 0);
  const uint16_t udp = c.start_login(1);
  REQUIRE(c.wait_converged(1, 4));
  const std::vector<uint64_t> ids = {
      0, 1, 7, 42, 1000, 123456789, 9223372036854775808ull, 18446744073709551615ull};
  auto owners = [&] {
    std::vector<std::string> out;
    for (uint64_t id : ids) {
      const auto w = c.imctl_json({"where", std::to_string(id)}).as_object();
      out.push_back(std::string(w.at("server").as_string()) + "/" +
                    std::to_string(w.at("shard").to_number<uint64_t>()));
    }
    return out;
  };
  const auto before = owners();
  const auto table_before = c.imctl_json({"table"}).as_object();

  // hash2 is now reached through a proxy: a new address, same server.
  TcpProxy proxy(port_of(c.hash_address(2)));
  const std::string moved_to = "127.0.0.1:" + std::to_string(proxy.port());
  const auto r = c.imctl({"server", "set", "hash2", "--address", moved_to});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("version 2") != std::string::npos);
  CHECK(owners() == before);  // the id -> server mapping, id for id
  auto table_after = c.imctl_json({"table"}).as_object();
  CHECK(table_after.at("version").to_number<uint64_t>() == 2);
  // Only that entry changed.
  auto servers_before = table_before.at("servers").as_array();
  auto servers_after = table_after.at("servers").as_array();
  REQUIRE(servers_after.size() == servers_before.size());
  CHECK(servers_after[1].as_object().at("address").as_string() == moved_to);
  servers_after[1].as_object()["address"] = servers_before[1].as_object().at("address");
  CHECK(servers_after == servers_before);
  CHECK(table_after.at("ranges") == table_before.at("ranges"));
  const auto history = c.imctl_json({"history", "--limit", "1"}).as_object();
  CHECK(history.at("versions").as_array().at(0).as_object().at("change").as_string() ==
        "server set hash2 address " + moved_to);

  // Every node takes it; the login server dials hash2 at its new address.
  REQUIRE(c.wait_converged(2, 4));
  UdpClient client(udp);
  CHECK(wait_until([&] {
    int ok = 0;
    for (uint64_t user = 1; user <= 30; ++user) {
      const auto reply =
          client.call(UdpClient::make(client::Op::kLogin, user, Endpoint::v4(0x0a000002, 2)));
      ok += reply && reply->status == client::Status::kOk;
    }
    return ok == 30;
  }));

  // Refusals: the same address again, an unknown server, an unspecified address.
  CHECK(c.imctl({"server", "set", "hash2", "--address", moved_to}).exit_code == 1);
  CHECK(c.imctl({"server", "set", "hash9", "--weight", "2"}).exit_code == 1);
  CHECK(c.imctl({"server", "set", "hash2", "--address", "0.0.0.0:7001"}).exit_code == 64);
  // A weight: a new version; in range mode no id moves either.
  CHECK(c.imctl({"server", "set", "hash3", "--weight", "2"}).exit_code == 0);
  CHECK(owners() == before);
  CHECK(c.version() == 3);
}
