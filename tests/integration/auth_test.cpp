// Authentication (--auth-key-file, docs/design.md §6) and per-source rate limiting (--rate-limit)
// end to end: real hash servers, the real login server, imctl token, udp_sim --auth-key-file.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/security/token.h"
#include "harness/cluster.h"
#include "harness/loopback.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"
#include "tests/integration/answers.h"

using namespace imhash;
using namespace std::chrono_literals;
using client::Op;
using client::Status;
using imhash::test::ChildProcess;
using imhash::test::Cluster;
using imhash::test::endpoint_of;
using imhash::test::status_of;
using imhash::test::UdpClient;

namespace {

constexpr const char* kKeyHex = "00112233445566778899aabbccddeeff0123456789abcdef0123456789abcdef";

std::vector<uint8_t> key() {
  std::string error;
  return *parse_hex_key(kKeyHex, error);
}

// Writes the key file (one per test process: ctest runs tests side by side) and returns its path.
std::string write_key_file() {
  const std::string path = "auth_key." + std::to_string(getpid()) + ".hex";
  std::ofstream(path) << kKeyHex << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

uint32_t unix_now() { return static_cast<uint32_t>(std::time(nullptr)); }

client::Message with_token(Op op, uint64_t user, std::optional<client::Token> token) {
  client::Message m = UdpClient::make(
      op, user, op == Op::kLogout ? std::nullopt : std::optional(endpoint_of(user)));
  m.token = token;
  return m;
}

}  // namespace

TEST_CASE("auth: with --auth-key-file only a valid token for the user logs in") {
  const std::string key_file = write_key_file();
  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login({"--auth-key-file", key_file});
  UdpClient c(cluster.udp_port());
  const auto k = key();
  const uint32_t now = unix_now();

  // No token: UNAUTHORIZED, header only, and nothing stored.
  auto no_token = c.call(with_token(Op::kLogin, 500, std::nullopt));
  REQUIRE(no_token);
  CHECK(no_token->status == Status::kUnauthorized);
  CHECK_FALSE(no_token->endpoint);
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 500))) == Status::kNotFound);

  // Expired, another user's, forged: UNAUTHORIZED, still nothing stored.
  CHECK(status_of(c.call(with_token(Op::kLogin, 500, make_token(k, 500, now - 5)))) ==
        Status::kUnauthorized);
  CHECK(status_of(c.call(with_token(Op::kLogin, 500, make_token(k, 501, now + 3600)))) ==
        Status::kUnauthorized);
  client::Token forged = make_token(k, 500, now + 3600);
  forged.mac[0] ^= 1;
  CHECK(status_of(c.call(with_token(Op::kLogin, 500, forged))) == Status::kUnauthorized);
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 500))) == Status::kNotFound);

  // A valid token: OK; LOOKUP and PING need none.
  const client::Token good = make_token(k, 500, now + 3600);
  auto login = c.call(with_token(Op::kLogin, 500, good));
  REQUIRE(login);
  CHECK(login->status == Status::kOk);
  CHECK(login->endpoint == endpoint_of(500));
  CHECK(status_of(c.call(with_token(Op::kHeartbeat, 500, good))) == Status::kOk);
  auto look = c.call(UdpClient::make(Op::kLookup, 500));
  REQUIRE(look);
  CHECK(look->status == Status::kOk);
  CHECK(look->endpoint == endpoint_of(500));
  CHECK(status_of(c.call(UdpClient::make(Op::kPing, 0))) == Status::kOk);

  // HEARTBEAT and LOGOUT without a valid token change nothing.
  CHECK(status_of(c.call(with_token(Op::kHeartbeat, 500, std::nullopt))) == Status::kUnauthorized);
  CHECK(status_of(c.call(with_token(Op::kLogout, 500, std::nullopt))) == Status::kUnauthorized);
  CHECK(status_of(c.call(with_token(Op::kLogout, 500, make_token(k, 500, now - 1)))) ==
        Status::kUnauthorized);
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 500))) == Status::kOk);
  CHECK(status_of(c.call(with_token(Op::kLogout, 500, good))) == Status::kOk);
  CHECK(status_of(c.call(UdpClient::make(Op::kLookup, 500))) == Status::kNotFound);
  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE("auth: a token from imctl token logs in, and a bad key file stops the login server") {
  const std::string key_file = write_key_file();
  ChildProcess imctl(IMHASH_IMCTL,
                     {"token", "777", "--ttl", "1h", "--key-file", key_file, "--json"});
  const std::string out = imctl.read_all();
  CHECK(imctl.stop(0) == 0);
  CAPTURE(out);
  const auto j = boost::json::parse(out).as_object();
  CHECK(j.at("user_id").to_number<uint64_t>() == 777u);
  const uint32_t expiry = j.at("expiry").to_number<uint32_t>();
  CHECK(expiry >= unix_now() + 3500);
  const std::string hex(j.at("token").as_string());
  REQUIRE(hex.size() == 56u);
  CHECK(hex == to_hex(token_bytes(make_token(key(), 777, expiry))));

  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login({"--auth-key-file", key_file});
  UdpClient c(cluster.udp_port());
  CHECK(status_of(c.call(with_token(Op::kLogin, 777, make_token(key(), 777, expiry)))) ==
        Status::kOk);

  std::ofstream("short_key.hex") << "00112233\n";
  ChildProcess bad(IMHASH_LOGIN_SERVER,
                   {"--udp", "127.0.0.1:0", "--table", cluster.options().table_file,
                    "--auth-key-file", "short_key.hex"});
  CHECK(bad.stop(0) == 78);  // EX_CONFIG
  ChildProcess missing(IMHASH_LOGIN_SERVER,
                       {"--udp", "127.0.0.1:0", "--table", cluster.options().table_file,
                        "--auth-key-file", "no_such_key_file.hex"});
  CHECK(missing.stop(0) == 78);
  // A key other users can read is refused, naming the file and its mode.
  const std::string open_key = "open_key." + std::to_string(getpid()) + ".hex";
  std::ofstream(open_key) << kKeyHex << "\n";
  ::chmod(open_key.c_str(), 0644);
  const std::string err_log = open_key + ".stderr";
  ChildProcess readable(IMHASH_LOGIN_SERVER,
                        {"--udp", "127.0.0.1:0", "--table", cluster.options().table_file,
                         "--auth-key-file", open_key},
                        {.stderr_log = err_log});
  CHECK(readable.stop(0) == 78);
  std::ostringstream err;
  err << std::ifstream(err_log).rdbuf();
  CHECK(err.str().find("accessible by other users (mode 0644)") != std::string::npos);
}

TEST_CASE("auth: udp_sim --auth-key-file --verify passes with 10k users") {
  const std::string key_file = write_key_file();
  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login({"--auth-key-file", key_file});
  ChildProcess sim(IMHASH_UDP_SIM, {"--target", "127.0.0.1:" + std::to_string(cluster.udp_port()),
                                    "--users", "10000", "--duration", "600", "--verify",
                                    "--auth-key-file", key_file, "--log-level", "warn"});
  // The load runs until every user has logged in and 5,000 lookups have been served, however long
  // that takes here; SIGINT then ends it and it prints its verdict.
  CHECK(test::wait_until([&] { return cluster.gets_served() >= 5000; }, test::kPatience, 200ms));
  CHECK(sim.stop(SIGINT, 30s) == 0);
  const std::string summary = sim.wait_for_line("verify:", 10s);
  CHECK(summary.find("verify: pass") != std::string::npos);

  // The same run without tokens is refused: every LOGIN is UNAUTHORIZED.
  UdpClient c(cluster.udp_port());
  CHECK(status_of(c.call(with_token(Op::kLogin, 1, std::nullopt))) == Status::kUnauthorized);
  CHECK(cluster.login().stop(SIGTERM) == 0);
}

TEST_CASE("rate limit: a burst from one source gets RATE_LIMITED replies, never larger, and few") {
  Cluster cluster;
  cluster.write_table(1, {0, 1, 2});
  cluster.start_login({"--rate-limit", "1000", "--rate-burst", "1000"});

  const int fd = test::connect_loopback(SOCK_DGRAM, cluster.udp_port());
  REQUIRE(fd >= 0);
  const int big = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));

  constexpr int kRequests = 5000;
  uint8_t buf[256];
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kRequests; ++i) {
    client::Message m = UdpClient::make(i % 2 ? Op::kPing : Op::kLookup, i % 2 ? 0 : 42);
    m.request_id = static_cast<uint32_t>(i + 1);
    const size_t n = client::encode_request(m, buf);
    REQUIRE(n == client::kMinDatagram);
    send(fd, buf, n, 0);
    if (i % 256 == 255) std::this_thread::sleep_for(1ms);  // let the server's buffer drain
  }
  int limited = 0, ok = 0, other = 0, larger = 0;
  timeval tv{0, 300'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) break;
    if (static_cast<size_t>(n) > client::kMinDatagram) ++larger;
    const auto d = client::decode_response({buf, static_cast<size_t>(n)});
    if (d.error != client::DecodeError::kOk) {
      ++other;
      continue;
    }
    if (d.msg.status == Status::kRateLimited) {
      ++limited;
      CHECK(n == static_cast<ssize_t>(client::kHeaderSize));
    } else if (d.msg.status == Status::kOk || d.msg.status == Status::kNotFound) {
      ++ok;
    } else {
      ++other;
    }
  }
  close(fd);
  // Not a timing assertion: the bound on replies follows from however long the exchange took.
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CAPTURE(limited);
  CAPTURE(ok);
  CAPTURE(other);
  CAPTURE(seconds);
  CHECK(larger == 0);
  CHECK(limited > 0);
  // RATE_LIMITED answers are rate limited themselves (10 a second per source and worker), so a
  // spoofed victim gets at most --rate-limit replies plus those.
  CHECK(limited <= static_cast<int>(10 * (seconds + 1)));
  CHECK(ok + limited <= static_cast<int>(1000 + 1000 * seconds + 10 * (seconds + 1)));
  CHECK(ok >= 500);       // the burst went through (some may be lost in socket buffers)
  CHECK(ok < kRequests);  // and not everything after it

  // Service is normal again once the bucket has refilled: wait (bounded) for a round of 50 pings
  // and a login answered OK throughout.
  UdpClient c(cluster.udp_port());
  const auto normal_round = [&] {
    for (int i = 0; i < 50; ++i) {
      const auto r = c.call(UdpClient::make(Op::kPing, 0));
      if (!r || r->status != Status::kOk) return false;
    }
    const auto login = c.call(UdpClient::make(Op::kLogin, 42, endpoint_of(42)));
    return login && login->status == Status::kOk;
  };
  CHECK(test::wait_until(normal_round, test::kPatience, 200ms));
  CHECK(cluster.login().stop(SIGTERM) == 0);
}
