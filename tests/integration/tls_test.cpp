// TLS on the login -> hash links (--tls-cert, --tls-key, --tls-ca; docs/security.md §5): with it
// on, logins and lookups are served over links a wiretap cannot read; a peer whose certificate
// another CA signed is refused both ways; a TLS peer and a plain one never talk (fail closed, a
// log line on each side); bytes pipelined behind a TLS handshake are refused. Certificates are
// made at run time with openssl(1) (harness/tls_certs.h).
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/frame_protocol.h"
#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/http_get.h"
#include "harness/log_file.h"
#include "harness/loopback.h"
#include "harness/tcp_proxy.h"
#include "harness/tls_certs.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"
#include "tests/integration/answers.h"

using namespace imhash;
using namespace imhash::test;

namespace {

// A hash server (2 shards, /metrics) and a login server (1 thread) dialling it, from a table file,
// through a TcpProxy that keeps every byte of the link; each with its own flags and log.
struct Pair {
  std::string hash_log, login_log, table, hash_metrics;
  std::unique_ptr<ChildProcess> hash;
  std::unique_ptr<TcpProxy> proxy;
  std::unique_ptr<ChildProcess> login;
  uint16_t udp = 0;
  uint16_t hash_port = 0;

  Pair(const std::string& tag, const std::vector<std::string>& hash_flags,
       const std::vector<std::string>& login_flags)
      : hash_log(log_path("tls_" + tag + "_hash")),
        login_log(log_path("tls_" + tag + "_login")),
        table("tls_" + tag + "." + std::to_string(getpid()) + ".table.json") {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--name",    "hash1",
                                     "--shards", "2",           "--metrics", "127.0.0.1:0"};
    args.insert(args.end(), hash_flags.begin(), hash_flags.end());
    hash = std::make_unique<ChildProcess>(IMHASH_HASH_SERVER, args,
                                          ChildOptions{.stderr_log = hash_log});
    const auto addrs = hash->wait_listening(2);
    hash_port = port_of(addrs[0]);
    hash_metrics = addrs[1];
    proxy = std::make_unique<TcpProxy>(hash_port);
    std::ofstream(table) << R"({"version": 1, "mode": "modulo", "modulo_hash": "identity",
      "servers": [{"name": "hash1", "address": "127.0.0.1:)"
                         << proxy->port() << R"(", "shards": 2}]})";
    args = {"--udp", "127.0.0.1:0", "--table", table, "--threads", "1", "--rate-limit", "0"};
    args.insert(args.end(), login_flags.begin(), login_flags.end());
    login = std::make_unique<ChildProcess>(IMHASH_LOGIN_SERVER, args,
                                           ChildOptions{.stderr_log = login_log});
    udp = port_of(login->wait_listening()[0]);
  }
  ~Pair() { ::unlink(table.c_str()); }

  // A LOGIN is answered UNAVAILABLE: the login server has no link up to the hash server.
  bool refuses_logins() const {
    UdpClient client(udp);
    auto r = client.call(UdpClient::make(client::Op::kLogin, 7, endpoint_of(7)));
    return r && r->status == client::Status::kUnavailable;
  }

  // Logs users 1..count in (waiting, bounded, for the links to come up) and looks each one up;
  // false if any answer is not OK or not the endpoint stored.
  bool serve(uint64_t count) const {
    UdpClient client(udp);
    const bool up = wait_until([&] {
      auto r = client.call(UdpClient::make(client::Op::kLogin, 1, endpoint_of(1)));
      return r && r->status == client::Status::kOk;
    });
    if (!up) return false;
    for (uint64_t id = 1; id <= count; ++id) {
      auto r = client.call(UdpClient::make(client::Op::kLogin, id, endpoint_of(id)));
      if (!r || r->status != client::Status::kOk) return false;
    }
    for (uint64_t id = 1; id <= count; ++id) {
      auto r = client.call(UdpClient::make(client::Op::kLookup, id));
      if (!r || r->status != client::Status::kOk || r->endpoint != endpoint_of(id)) return false;
    }
    return true;
  }
};

// The bytes an UPSERT of `user` carries for its endpoint: what a wiretap on a plain link sees.
std::string endpoint_bytes(uint64_t user) {
  frame::Request q{.type = frame::FrameType::kUpsert, .id = user, .endpoint = endpoint_of(user)};
  std::vector<uint8_t> out;
  frame::append_request(q, out);
  const size_t n = 1 + 2 + 4;  // family, port, IPv4 address: the end of the body
  return std::string(out.end() - n, out.end());
}

std::string write_cluster_key() {
  const std::string path = "tls_cluster." + std::to_string(getpid()) + ".key";
  std::ofstream(path) << "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

}  // namespace

TEST_CASE("tls: a cluster with TLS on serves logins and lookups over links a wiretap cannot read") {
  const TlsCerts certs("tls_serves");
  const std::string key = write_cluster_key();
  const std::vector<std::string> keyed = {"--cluster-key-file", key};
  std::string plain_seen, tls_seen;
  {
    // The control: without TLS the endpoints cross the link in the clear.
    const Pair plain("plain", keyed, keyed);
    REQUIRE(plain.serve(100));
    plain_seen = plain.proxy->captured();
  }
  {
    std::vector<std::string> hash_flags = certs.flags("hash"), login_flags = certs.flags("login");
    hash_flags.insert(hash_flags.end(), keyed.begin(), keyed.end());
    login_flags.insert(login_flags.end(), keyed.begin(), keyed.end());
    const Pair tls("on", hash_flags, login_flags);
    REQUIRE(tls.serve(100));
    // Both shards' links are bound over TLS (the server samples its shards twice a second).
    CHECK(wait_until(
        [&] { return metric(scrape(tls.hash_metrics), "imhash_hash_tls_connections") == 2; }));
    CHECK(metric(scrape(tls.hash_metrics), "imhash_hash_tls_handshake_failures_total") == 0);
    tls_seen = tls.proxy->captured();
  }
  uint64_t in_clear = 0, in_tls = 0;
  for (uint64_t id = 1; id <= 100; ++id) {
    in_clear += plain_seen.find(endpoint_bytes(id)) != std::string::npos;
    in_tls += tls_seen.find(endpoint_bytes(id)) != std::string::npos;
  }
  CHECK(in_clear == 100);
  CHECK(in_tls == 0);
  CHECK(tls_seen.size() > plain_seen.size() / 2);  // the traffic did cross this proxy
  ::unlink(key.c_str());
}

TEST_CASE(
    "tls: a certificate another CA signed is refused, by the hash server and by the login server") {
  const TlsCerts certs("tls_other_ca");
  SUBCASE("the login server's") {
    // It trusts our CA, but the hash server does not trust the CA of its certificate.
    const Pair p("stranger_login", certs.flags("hash"), certs.flags("stranger", certs.ca()));
    CHECK(log_says(p.hash_log, "TLS handshake with"));
    CHECK(log_says(p.login_log, "TLS failed"));
    CHECK(metric(scrape(p.hash_metrics), "imhash_hash_tls_connections") == 0);
    CHECK(p.refuses_logins());
  }
  SUBCASE("the hash server's") {
    const Pair p("stranger_hash", certs.flags("stranger", certs.ca()), certs.flags("login"));
    CHECK(log_says(p.login_log, "TLS failed: certificate verify failed"));
    CHECK(log_says(p.hash_log, "TLS handshake with"));
    CHECK(p.refuses_logins());
  }
}

TEST_CASE("tls: a TLS peer and a plain one are refused both ways, with a log line on each side") {
  const TlsCerts certs("tls_mismatch");
  SUBCASE("TLS login server, plain hash server") {
    const Pair p("tls_login", {}, certs.flags("login"));
    CHECK(log_says(p.hash_log, "TLS asked for, and this server has no --tls-cert"));
    CHECK(log_says(p.login_log, "the server has no TLS and we have --tls-cert"));
    CHECK(metric(scrape(p.hash_metrics), "imhash_hash_tls_refused_total") >= 1);
  }
  SUBCASE("plain login server, TLS hash server") {
    const Pair p("plain_login", certs.flags("hash"), {});
    CHECK(log_says(p.hash_log, "no TLS asked for, and this server runs TLS"));
    CHECK(log_says(p.login_log, "handshake refused: UNAUTHORIZED"));
    CHECK(metric(scrape(p.hash_metrics), "imhash_hash_tls_refused_total") >= 1);
    CHECK(p.refuses_logins());
  }
}

TEST_CASE("tls: requests pipelined behind a HELLO that asks for TLS are refused") {
  const TlsCerts certs("tls_pipelined");
  const Pair p("pipelined", certs.flags("hash"), certs.flags("login"));
  std::vector<uint8_t> bytes;
  frame::Request hello{.type = frame::FrameType::kHello,
                       .flags = frame::kFlagTls,
                       .protocol_version = frame::kProtocolVersion,
                       .name = "pipeliner"};
  frame::append_request(hello, bytes);
  frame::append_request(frame::Request{.type = frame::FrameType::kPing}, bytes);
  const int fd = connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, p.hash_port);
  REQUIRE(fd >= 0);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
  CHECK(log_says(p.hash_log, "(pipeliner): bytes pipelined behind a TLS handshake"));
  ::close(fd);
}

TEST_CASE(
    "tls: with TLS on the config server too, the cluster converges and serves, and a node "
    "without TLS cannot register") {
  const TlsCerts certs("tls_config");
  const std::string key = write_cluster_key();
  ConfigCluster c(ConfigClusterOptions{.cluster_key_file = key, .tls_flags = certs.flags("hash")});
  const uint16_t udp = c.start_serving(2);
  UdpClient client(udp);
  for (uint64_t id = 1; id <= 50; ++id) {
    auto r = client.call(UdpClient::make(client::Op::kLogin, id, endpoint_of(id)));
    REQUIRE(r);
    CHECK(r->status == client::Status::kOk);
  }
  // A hash server with the key but without TLS: its config link is refused.
  const std::string log = log_path("tls_config_plain_node");
  ChildProcess plain(IMHASH_HASH_SERVER,
                     {"--listen", "127.0.0.1:0", "--name", "hash9", "--config", c.config_address(),
                      "--cluster-key-file", key},
                     {.stderr_log = log});
  plain.wait_listening();
  CHECK(log_says(log, "config link (hash hash9)"));
  bool listed = false;
  const auto status = c.imctl_json({"status"});
  for (const auto& n : status.as_object().at("nodes").as_array()) {
    listed = listed || n.as_object().at("name").as_string() == "hash9";
  }
  CHECK_FALSE(listed);
  ::unlink(key.c_str());
}
