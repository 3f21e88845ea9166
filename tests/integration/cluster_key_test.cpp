// The cluster key (--cluster-key-file, docs/security.md §5) end to end: every internal link proves
// the key both ways (common/security/link_auth.h), outsiders without it are refused at the hash
// port and at the config server's node port while the cluster keeps serving, internal listeners
// refuse a public address without a credential, and the hash port's connection caps and idle
// timeout.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/frame_protocol.h"
#include "common/routing/control_protocol.h"
#include "common/security/link_auth.h"
#include "common/security/token.h"
#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/frame_client.h"
#include "harness/http_get.h"
#include "harness/log_file.h"
#include "harness/loopback.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"

using namespace imhash;
using namespace imhash::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kClusterKey =
    "9f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
constexpr const char* kOtherKey =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::string write_key(const std::string& what, const char* hex) {
  const std::string path = what + "." + std::to_string(getpid()) + ".key";
  std::ofstream(path) << hex << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

std::vector<uint8_t> key_of(const char* hex) {
  std::string error;
  return parse_hex_key(hex, error).value();
}

std::string exception_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A raw TCP connection with a receive timeout, so that a test never hangs.
struct RawConnection {
  int fd;
  explicit RawConnection(uint16_t port) : fd(connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, port)) {
    REQUIRE(fd >= 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConnection() { ::close(fd); }
  void send_all(const std::vector<uint8_t>& bytes) const {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  // Everything until the peer closes (or 10 s pass without a byte).
  std::vector<uint8_t> read_to_close() const {
    std::vector<uint8_t> all;
    uint8_t buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      all.insert(all.end(), buf, buf + n);
    }
    return all;
  }
};

std::vector<frame::Response> responses_in(const std::vector<uint8_t>& bytes) {
  std::vector<frame::Response> out;
  std::span<const uint8_t> rest(bytes);
  for (;;) {
    frame::Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    if (frame::next_frame(rest, h, body, used) != frame::DecodeStatus::kOk) break;
    frame::Response r;
    if (frame::decode_response(h, body, r) == frame::DecodeStatus::kOk) {
      r.name = {};
      r.auth = {};  // points into `rest`; only type and status are looked at
      out.push_back(r);
    }
    rest = rest.subspan(used);
  }
  return out;
}

}  // namespace

TEST_CASE(
    "cluster key: outsiders without the key are refused at the hash port and the node port "
    "while the cluster serves") {
  const std::string key_file = write_key("cluster", kClusterKey);
  const std::string other_file = write_key("other", kOtherKey);
  ConfigCluster c(ConfigClusterOptions{.metrics = true, .cluster_key_file = key_file});
  const uint16_t udp = c.start_serving(2);
  const uint64_t version = c.version();
  UdpClient client(udp);
  for (uint64_t id = 1; id <= 300; ++id) {
    auto r = client.call(UdpClient::make(client::Op::kLogin, id, Endpoint::v4(0x0a000001, 5000)));
    REQUIRE(r);
    REQUIRE(r->status == client::Status::kOk);
  }
  const uint16_t hash1 = port_of(c.hash_address(1));

  // The members themselves get through (the cluster's own test client, with the key).
  const auto key = key_of(kClusterKey);
  CHECK(FrameClient(hash1, 0, "member", key).stat(frame::kStatRecords) > 0);

  // No key: the HELLO is refused.
  CHECK(exception_text([&] { FrameClient(hash1, 0, "outsider"); }).find("UNAUTHORIZED") !=
        std::string::npos);
  // Another key: the server's proof does not check out, and the client gives up.
  CHECK(exception_text([&] {
          FrameClient(hash1, 0, "outsider", key_of(kOtherKey));
        }).find("proof") != std::string::npos);
  // A forged proof, with a purge of everything pipelined behind it: AUTH refused, the connection
  // closed, the purge never served.
  {
    RawConnection raw(hash1);
    const auto nonce = link_auth::make_nonce().value();
    frame::Request hello{.type = frame::FrameType::kHello,
                         .flags = frame::kFlagAuth,
                         .protocol_version = frame::kProtocolVersion,
                         .name = "impostor",
                         .role = Role::kLogin};
    hello.auth = std::string_view(reinterpret_cast<const char*>(nonce.data()), nonce.size());
    const std::string forged(link_auth::kProofSize, '\0');
    frame::Request auth{.type = frame::FrameType::kAuth, .correlation = 1, .auth = forged};
    frame::Request purge{
        .type = frame::FrameType::kPurge, .correlation = 2, .purge = frame::PurgeAction::kAll};
    std::vector<uint8_t> out;
    frame::append_request(hello, out);
    frame::append_request(auth, out);
    frame::append_request(purge, out);
    raw.send_all(out);
    const auto answers = responses_in(raw.read_to_close());
    REQUIRE(answers.size() == 2);  // HELLO and AUTH, nothing for the PURGE
    CHECK(answers[0].status == frame::FrameStatus::kOk);
    CHECK(answers[1].type == frame::FrameType::kAuth);
    CHECK(answers[1].status == frame::FrameStatus::kUnauthorized);
  }

  // The node port: a registration without the handshake is refused...
  {
    RawConnection raw(port_of(c.config_address()));
    control::Register impostor{
        .role = Role::kHash, .name = "hash1", .address = "10.6.6.6:7001", .shards = 1};
    std::vector<uint8_t> out;
    control::append_message(impostor, out);
    raw.send_all(out);
    const auto reply = raw.read_to_close();
    control::Message m;
    size_t used = 0;
    std::string error;
    REQUIRE(control::next_message(reply, m, used, error) == control::DecodeStatus::kOk);
    REQUIRE(std::holds_alternative<control::Refused>(m));
    CHECK(std::get<control::Refused>(m).reason.find("cluster key") != std::string::npos);
  }
  // ... and so are real daemons without the key or with another one.
  const std::string keyless_log = log_path("keyless"), wrong_log = log_path("wrong_key");
  ChildProcess keyless(IMHASH_HASH_SERVER,
                       {"--listen", "127.0.0.1:0", "--name", "hash8", "--shards", "1", "--config",
                        c.config_address()},
                       {.stderr_log = keyless_log});
  CHECK(log_says(keyless_log, "before proving the cluster key"));
  ChildProcess wrong_key(
      IMHASH_HASH_SERVER,
      {"--listen", "127.0.0.1:0", "--name", "hash9", "--shards", "1", "--config",
       c.config_address(), "--cluster-key-file", other_file, "--metrics", "127.0.0.1:0"},
      {.stderr_log = wrong_log});
  const std::string wrong_metrics = wrong_key.wait_listening(2)[1];
  CHECK(log_says(wrong_log, "did not prove the cluster key"));
  CHECK(metric(scrape(wrong_metrics), "imhash_config_link_refused_total") >= 1);

  // Nothing changed: no impostor registered, the real hash1 still up, every user found.
  const auto status = c.imctl_json({"status"});
  for (const auto& n : status.as_object().at("nodes").as_array()) {
    const std::string name(n.as_object().at("name").as_string());
    CHECK(name != "hash8");
    CHECK(name != "hash9");
    if (name == "hash1") CHECK(n.as_object().at("address").as_string() == c.hash_address(1));
  }
  CHECK(c.version() == version);
  for (uint64_t id = 1; id <= 300; ++id) {
    auto r = client.call(UdpClient::make(client::Op::kLookup, id));
    REQUIRE(r);
    CHECK(r->status == client::Status::kOk);
  }
  CHECK(metric(scrape(c.hash_metrics(1)), "imhash_hash_auth_refused_total") >= 2);
  CHECK(metric(scrape(c.config_metrics()), "imhash_config_auth_refused_total") >= 2);
  ::unlink(key_file.c_str());
  ::unlink(other_file.c_str());
}

TEST_CASE(
    "cluster key: a login server with the key does not use a hash server that cannot prove "
    "it") {
  const std::string key_file = write_key("login_only", kClusterKey);
  ChildProcess hash(IMHASH_HASH_SERVER,
                    {"--listen", "127.0.0.1:0", "--name", "hash1", "--shards", "1"});
  const std::string hash_addr = hash.wait_listening()[0];
  const std::string table = "login_only_table." + std::to_string(getpid()) + ".json";
  std::ofstream(table) << R"({"version": 1, "mode": "modulo", "modulo_hash": "identity",
    "servers": [{"name": "hash1", "address": ")"
                       << hash_addr << R"(", "shards": 1}]})";
  const std::string log = log_path("login_only");
  ChildProcess login(IMHASH_LOGIN_SERVER,
                     {"--udp", "127.0.0.1:0", "--table", table, "--threads", "1",
                      "--cluster-key-file", key_file, "--metrics", "127.0.0.1:0"},
                     {.stderr_log = log});
  const auto addresses = login.wait_listening(2);
  const uint16_t udp = port_of(addresses[0]);
  CHECK(log_says(log, "offered no proof of the cluster key"));
  CHECK(metric(scrape(addresses[1]), "imhash_login_link_refused_total") >= 1);
  UdpClient client(udp);
  auto r = client.call(UdpClient::make(client::Op::kLogin, 7, Endpoint::v4(0x0a000001, 5000)));
  REQUIRE(r);
  CHECK(r->status == client::Status::kUnavailable);
  CHECK(FrameClient(port_of(hash_addr), 0).stat(frame::kStatRecords) == 0);
  ::unlink(table.c_str());
  ::unlink(key_file.c_str());
}

TEST_CASE(
    "safe by default: an internal listener on a non-loopback address needs a credential or "
    "--insecure") {
  struct Case {
    const char* binary;
    std::vector<std::string> args;
    const char* says;
  };
  const std::string state = "safe_default_state." + std::to_string(getpid());
  const std::vector<Case> cases = {
      {IMHASH_HASH_SERVER, {"--listen", "0.0.0.0:0"}, "--cluster-key-file"},
      {IMHASH_CONFIG_SERVER,
       {"--listen", "0.0.0.0:0", "--admin", "127.0.0.1:0", "--state-dir", state},
       "--cluster-key-file"},
      {IMHASH_CONFIG_SERVER,
       {"--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0", "--state-dir", state},
       "--admin-token-file"},
  };
  const std::string log = log_path("safe_default");
  for (const Case& k : cases) {
    CAPTURE(k.args[1]);
    ::unlink(log.c_str());
    ChildProcess p(k.binary, k.args, {.stderr_log = log});
    p.read_all();
    CHECK(p.stop(0) == 64);
    const std::string out = file_text(log);
    CAPTURE(out);
    CHECK(out.find(k.says) != std::string::npos);
    CHECK(out.find("--insecure") != std::string::npos);
  }
}

TEST_CASE(
    "hash port: connections over the per-source cap are closed at once, idle links are "
    "closed, and the count is released") {
  const std::string log = log_path("caps");
  ChildProcess hash(IMHASH_HASH_SERVER,
                    {"--listen", "127.0.0.1:0", "--name", "hash1", "--shards", "1",
                     "--max-connections-per-source", "3", "--idle-timeout", "1"},
                    {.stderr_log = log});
  const uint16_t port = port_of(hash.wait_listening()[0]);
  std::vector<std::unique_ptr<FrameClient>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<FrameClient>(port, 0));
  {
    RawConnection over(port);  // the fourth from 127.0.0.1
    CHECK(over.read_to_close().empty());
  }
  CHECK(log_says(log, "too many connections from this address"));
  for (auto& f : held) {
    auto pong = f->call({frame::Request{.type = frame::FrameType::kPing, .correlation = 9}});
    REQUIRE(pong.size() == 1);
    CHECK(pong[0].r.status == frame::FrameStatus::kOk);
  }
  // Silent from now on: each is closed by the idle timeout (read_one sees the close).
  for (auto& f : held) {
    OwnedResponse r;
    CHECK_FALSE(f->read_one(r));
  }
  CHECK(log_says(log, "silent for"));
  // Their places are free again.
  const bool admitted = wait_until([&] {
    try {
      FrameClient again(port, 0);
      return again.stat(frame::kStatConnections) >= 1;
    } catch (const std::exception&) {
      return false;
    }
  });
  CHECK(admitted);
}
