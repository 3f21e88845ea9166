// Hostile input against the real servers on loopback (issue 5): a flood of random and mutated
// datagrams at a login server, malformed frames and silent connections at a hash server, and bad
// HTTP at the config server's admin API. Every server must stay up, keep serving valid traffic,
// never answer a datagram with more bytes than it carried, and count what it rejected.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/codec/frame_protocol.h"
#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/frame_client.h"
#include "harness/loopback.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"

using namespace imhash;
using namespace imhash::test;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------------------------
// UDP flood helpers

constexpr size_t kDatagrams = 100'000;
constexpr size_t kSockets = 4;
constexpr size_t kBatch =
    32;  // per socket and round: bounded, so the kernel buffers never overflow
constexpr uint64_t kSeed = 0x1badd00d5eedULL;

void put_u16(std::vector<uint8_t>& d, size_t at, uint16_t v) {
  d[at] = static_cast<uint8_t>(v >> 8);
  d[at + 1] = static_cast<uint8_t>(v);
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> d(n);
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  return d;
}

// A well-formed request of a random op, padded to 48 bytes or (sometimes) more.
std::vector<uint8_t> valid_request(std::mt19937_64& rng) {
  client::Message m;
  m.op = static_cast<client::Op>(1 + rng() % 5);
  m.user_id = m.op == client::Op::kPing ? 0 : 1 + rng() % 1'000'000;
  if ((m.op == client::Op::kLogin || m.op == client::Op::kHeartbeat) && rng() % 2 == 0) {
    m.endpoint = Endpoint::v4(0x0a000000u + static_cast<uint32_t>(rng() % 65536),
                              static_cast<uint16_t>(1024 + rng() % 60000));
  }
  std::array<uint8_t, 1024> buf{};
  const size_t pad = rng() % 3 == 0 ? 48 + rng() % 400 : 48;
  const size_t n = client::encode_request(m, buf, pad);
  return {buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n)};
}

// Datagram number `i` of the flood: a valid request mutated one of eleven ways, or random bytes.
std::vector<uint8_t> hostile_datagram(std::mt19937_64& rng, size_t i, size_t& truncation) {
  std::vector<uint8_t> d = valid_request(rng);
  switch (i % 12) {
    case 0:  // left valid: the flood mixes in real traffic
      break;
    case 1: {  // bit flips
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f)
        d[rng() % d.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    }
    case 2:  // truncation at every length in turn
      d.resize(truncation++ % d.size());
      break;
    case 3:  // wrong magic
      d[rng() % 2] ^= static_cast<uint8_t>(1 + rng() % 255);
      break;
    case 4:  // wrong version
      d[2] = static_cast<uint8_t>(2 + rng() % 254);
      break;
    case 5: {  // unknown op, or a response op in a request
      static constexpr std::array<uint8_t, 6> ops = {0, 6, 7, 0x7f, 0x81, 0xff};
      d[3] = rng() % 2 ? ops[rng() % ops.size()] : static_cast<uint8_t>(6 + rng() % 250);
      break;
    }
    case 6: {  // body_len lies
      const uint16_t actual = static_cast<uint16_t>(d.size() - client::kHeaderSize);
      uint16_t lie = static_cast<uint16_t>(rng());
      if (lie == actual) ++lie;
      put_u16(d, 18, lie);
      break;
    }
    case 7: {  // the last TLV claims a few bytes more than the body holds
      const size_t body = d.size() - client::kHeaderSize;
      d.resize(client::kHeaderSize + 2 + rng() % (body - 2));  // keep a TLV header, cut its value
      put_u16(d, 18, static_cast<uint16_t>(d.size() - client::kHeaderSize));
      d[20] = static_cast<uint8_t>(rng() % 5);
      d[21] = static_cast<uint8_t>(d.size() - client::kHeaderSize - 2 + 1 + rng() % 20);
      break;
    }
    case 8: {  // a huge TLV length (255) with a short value, consistent body_len
      d[20] = static_cast<uint8_t>(rng() % 256);
      d[21] = 255;
      break;
    }
    case 9:  // random bytes, random size 0..1500
      d = random_bytes(rng, rng() % 1501);
      break;
    case 10: {  // random bytes behind a valid magic and version, body_len right half the time
      d = random_bytes(rng, rng() % 1501);
      if (d.size() >= client::kHeaderSize) {
        d[0] = client::kMagic[0];
        d[1] = client::kMagic[1];
        d[2] = client::kVersion;
        if (rng() % 2) put_u16(d, 18, static_cast<uint16_t>(d.size() - client::kHeaderSize));
      }
      break;
    }
    default:  // short random bytes
      d = random_bytes(rng, rng() % 64);
      break;
  }
  return d;
}

struct FloodResult {
  uint64_t sent = 0;
  uint64_t replies = 0;
  uint64_t larger = 0;     // replies larger than the datagram that caused them
  uint64_t unmatched = 0;  // replies whose request_id names no datagram sent (or one < 8 bytes)
  uint64_t send_errors = 0;
  std::map<std::string, uint64_t> expected;  // by the codec's own verdict (DecodeError name)
  uint64_t expected_rejected = 0;
};

int udp_socket(uint16_t port) {
  const int fd = connect_loopback(SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, port);
  REQUIRE(fd >= 0);
  return fd;
}

// Reads every reply that arrives until the sockets are quiet for `quiet` (bounded).
void drain(const std::vector<int>& fds, const std::vector<std::vector<uint32_t>>& sizes,
           FloodResult& r, std::chrono::milliseconds quiet, Clock::time_point deadline) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back(pollfd{fd, POLLIN, 0});
  std::array<uint8_t, 70000> buf{};
  while (Clock::now() < deadline) {
    if (poll(p.data(), p.size(), static_cast<int>(quiet.count())) <= 0) return;
    for (size_t s = 0; s < fds.size(); ++s) {
      if (!(p[s].revents & POLLIN)) continue;
      for (int k = 0; k < 1000; ++k) {
        const ssize_t n = recv(fds[s], buf.data(), buf.size(), 0);
        if (n < 0) break;
        ++r.replies;
        const size_t len = static_cast<size_t>(n);
        const uint32_t rid = len >= 8 ? get_u32(buf.data() + 4) : 0;
        if (len < 8 || rid == 0 || rid >= sizes[s].size() || sizes[s][rid] == 0) {
          ++r.unmatched;
        } else if (len > sizes[s][rid]) {
          ++r.larger;
        }
      }
    }
  }
}

FloodResult flood(uint16_t port) {
  std::mt19937_64 rng(kSeed);
  FloodResult r;
  std::vector<int> fds;
  for (size_t s = 0; s < kSockets; ++s) fds.push_back(udp_socket(port));
  // sizes[socket][request_id]: the datagram's length; request ids are unique per socket, from 1.
  std::vector<std::vector<uint32_t>> sizes(kSockets, std::vector<uint32_t>(1));
  size_t truncation = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  size_t i = 0;
  while (i < kDatagrams && Clock::now() < deadline) {
    for (size_t s = 0; s < kSockets; ++s) {
      for (size_t b = 0; b < kBatch && i < kDatagrams; ++b, ++i) {
        std::vector<uint8_t> d = hostile_datagram(rng, i, truncation);
        const uint32_t rid = static_cast<uint32_t>(sizes[s].size());
        sizes[s].push_back(0);
        if (d.size() >= 8) {  // a unique request_id, so that replies can be matched
          d[4] = static_cast<uint8_t>(rid >> 24);
          d[5] = static_cast<uint8_t>(rid >> 16);
          d[6] = static_cast<uint8_t>(rid >> 8);
          d[7] = static_cast<uint8_t>(rid);
          sizes[s][rid] = static_cast<uint32_t>(d.size());
        }
        const client::Decoded dec = client::decode_request(d);
        ++r.expected[client::to_string(dec.error)];
        if (dec.error != client::DecodeError::kOk) ++r.expected_rejected;
        ssize_t n = -1;
        for (int attempt = 0; attempt < 100 && n < 0; ++attempt) {
          n = send(fds[s], d.data(), d.size(), 0);
          if (n < 0 && errno == EAGAIN) {
            pollfd p{fds[s], POLLOUT, 0};
            poll(&p, 1, 10);
          } else if (n < 0) {
            break;  // ECONNREFUSED after an ICMP: counted below, the server check catches it
          }
        }
        if (n < 0) ++r.send_errors;
        ++r.sent;
      }
    }
    drain(fds, sizes, r, std::chrono::milliseconds(2),
          Clock::now() + std::chrono::milliseconds(200));
  }
  drain(fds, sizes, r, std::chrono::milliseconds(300), Clock::now() + std::chrono::seconds(3));
  for (int fd : fds) close(fd);
  return r;
}

// The flood came from 127.0.0.1 too: the login server's per-source rate limiter may still be
// refilling its bucket, so a valid request is retried (bounded) while it gets RATE_LIMITED.
std::optional<client::Message> call_patiently(UdpClient& c, const client::Message& m) {
  std::optional<client::Message> r;
  wait_until(
      [&] {
        r = c.call(m, std::chrono::milliseconds(500));
        return r && r->status != client::Status::kRateLimited;
      },
      kPatience, std::chrono::milliseconds(100));
  return r;
}

// The `stats` object the node called `name` sent with its last heartbeat (empty if none yet).
json::object node_stats(ConfigCluster& c, const std::string& name) {
  const auto st = c.imctl_json({"status"});
  for (const auto& n : st.as_object().at("nodes").as_array()) {
    const auto& o = n.as_object();
    if (o.at("name").as_string() == name && o.contains("stats") && o.at("stats").is_object()) {
      return o.at("stats").as_object();
    }
  }
  return {};
}

uint64_t num(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v ? v->to_number<uint64_t>() : 0;
}

// ---------------------------------------------------------------------------------------------
// TCP helpers (hash server, admin API)

int tcp_connect(uint16_t port) {
  const int fd = connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, port);
  REQUIRE(fd >= 0);
  return fd;
}

// Waits (bounded) until the peer closes `fd`, reading and discarding what it sends; returns the
// bytes read, or -1 when it did not close in time.
long wait_closed(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  long total = 0;
  std::array<uint8_t, 4096> buf{};
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return total;
    if (n > 0) total += n;
  }
  return -1;
}

void send_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early (413, 431): what it said is still read
    off += static_cast<size_t>(n);
  }
}

struct RawHttpReply {
  int status = 0;  // 0: no HTTP reply at all
  size_t bytes = 0;
  bool closed = false;
  std::string text;
};

// Sends `head` then `body` (in chunks, reading meanwhile, so a server that answers early and closes
// is heard) and reads until the server closes the connection or `timeout` passes.
RawHttpReply raw_http_exchange(uint16_t port, const std::string& head, const std::string& body = {},
                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int fd = tcp_connect(port);
  RawHttpReply r;
  send_all(fd, head);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  size_t off = 0;
  const auto deadline = Clock::now() + timeout;
  std::array<char, 8192> buf{};
  while (Clock::now() < deadline && r.bytes < (1u << 20)) {
    pollfd p{fd, static_cast<short>(POLLIN | (off < body.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 50) <= 0) continue;
    if (p.revents & POLLIN) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n > 0) {
        r.bytes += static_cast<size_t>(n);
        r.text.append(buf.data(), static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || errno != EAGAIN) {
        r.closed = true;
        break;
      }
    }
    if (p.revents & (POLLERR | POLLHUP)) {
      r.closed = true;
      break;
    }
    if ((p.revents & POLLOUT) && off < body.size()) {
      const ssize_t n =
          send(fd, body.data() + off, std::min<size_t>(body.size() - off, 65536), MSG_NOSIGNAL);
      if (n > 0) off += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN) off = body.size();  // reset: stop sending, keep reading
    }
  }
  close(fd);
  if (r.text.rfind("HTTP/1.1 ", 0) == 0 && r.text.size() >= 12) {
    r.status = std::stoi(r.text.substr(9, 3));
  }
  return r;
}

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

const std::string kGetStatus =
    "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

}  // namespace

TEST_CASE(
    "hostile: 100k random and mutated datagrams at a login server, never amplified, counted") {
  ConfigCluster c;
  c.start_config();
  c.start_hash(1);
  REQUIRE(c.imctl({"server", "add", "hash1"}).exit_code == 0);
  const uint16_t udp = c.start_login(1);
  REQUIRE(c.wait_converged(1, 2));

  const FloodResult r = flood(udp);
  REQUIRE(r.sent == kDatagrams);
  CHECK(c.login(1).running());
  CHECK(r.larger == 0);
  CHECK(r.unmatched == 0);
  CHECK(r.send_errors == 0);
  CHECK(r.replies > 0);

  // Still up and serving: PING, then a LOGIN / LOOKUP round trip.
  UdpClient client(udp);
  auto ping = call_patiently(client, UdpClient::make(client::Op::kPing, 0));
  REQUIRE(ping);
  CHECK(ping->status == client::Status::kOk);
  const uint64_t user = 4242424242ULL;
  const Endpoint ep = Endpoint::v4(0x0a010203, 5555);
  auto login = call_patiently(client, UdpClient::make(client::Op::kLogin, user, ep));
  REQUIRE(login);
  CHECK(login->status == client::Status::kOk);
  auto look = call_patiently(client, UdpClient::make(client::Op::kLookup, user));
  REQUIRE(look);
  CHECK(look->status == client::Status::kOk);
  CHECK(look->endpoint == ep);

  // The counters reach the config server with the heartbeats (workers are sampled every 500 ms):
  // wait until `received` covers the flood and stays put across more than one sample.
  json::object stats;
  uint64_t last = 0;
  int stable = 0;
  const bool settled = wait_until(
      [&] {
        stats = node_stats(c, "login1");
        const uint64_t received = num(stats, "received");
        stable = received >= r.sent * 9 / 10 && received == last ? stable + 1 : 0;
        last = received;
        return stable >= 4;
      },
      kPatience, std::chrono::milliseconds(200));
  REQUIRE_MESSAGE(settled, "login1 stats never settled: " << json::serialize(stats));

  uint64_t rejected = 0;
  std::ostringstream by_reason;
  for (const auto& [key, value] : stats) {
    const bool dropped = key.starts_with("dropped_");
    const bool refused = key == "replies_BAD_REQUEST" || key == "replies_UNSUPPORTED_VERSION" ||
                         key == "replies_RATE_LIMITED";
    if (dropped || refused) {
      rejected += value.to_number<uint64_t>();
      by_reason << " " << std::string(key) << "=" << value.to_number<uint64_t>();
    }
  }
  std::ostringstream expected;
  for (const auto& [k, v] : r.expected) expected << " " << k << "=" << v;
  MESSAGE("datagrams tried: " << r.sent << " (seed " << kSeed << "), received by the server: "
                              << num(stats, "received") << ", replies: " << r.replies);
  MESSAGE("codec verdicts of what was sent:" << expected.str());
  MESSAGE("rejected by the login server: " << rejected << " —" << by_reason.str());
  MESSAGE("replies larger than the request: " << r.larger
                                              << ", unmatched replies: " << r.unmatched);

  // Every reason the flood exercised was counted, and the totals agree with the codec's verdicts
  // (less what the kernel may have lost on loopback, at most 10 %).
  CHECK(num(stats, "dropped_too_short") > 0);
  CHECK(num(stats, "dropped_bad_magic") > 0);
  CHECK(num(stats, "replies_BAD_REQUEST") > 0);
  CHECK(num(stats, "replies_UNSUPPORTED_VERSION") > 0);
  CHECK(num(stats, "dropped_too_short") + num(stats, "dropped_bad_magic") <=
        r.expected.at("too_short") + r.expected.at("bad_magic"));
  CHECK(rejected >= r.expected_rejected * 9 / 10);
  CHECK(rejected <= r.sent);
  CHECK(c.login(1).running());
}

TEST_CASE("hostile: malformed frames and silent connections at a hash server") {
  ChildProcess server(IMHASH_HASH_SERVER, {"--listen", "127.0.0.1:0", "--shards", "2"});
  const uint16_t port = port_of(server.wait_listening()[0]);
  FrameClient good(port, 0);
  const frame::Request upsert{.type = frame::FrameType::kUpsert,
                              .correlation = 1,
                              .id = 2,  // OK or WRONG_SHARD: either way it is served
                              .endpoint = Endpoint::v4(0x0a000002, 2)};
  std::vector<uint8_t> get_frame;
  frame::append_request(frame::Request{.type = frame::FrameType::kGet, .correlation = 7, .id = 1},
                        get_frame);

  std::mt19937_64 rng(kSeed);
  std::vector<std::vector<uint8_t>> bad = {
      {0x7f, 0xff, 0xff, 0xff, 2, 0, 0, 0},                              // oversize length
      {0x00, 0x01, 0x00, 0x01, 3, 0, 0, 0},                              // just above the maximum
      {0, 0, 0, 16, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},    // unknown type
      {0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     // type 0
      {0, 0, 0, 17, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},  // GET, 1-byte body
      {0, 0, 0, 16, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     // UPSERT, no body
      {0, 0, 0, 3, 3, 0, 0},                                             // length below a header
  };
  std::vector<uint8_t> reserved = get_frame;  // a valid GET with the reserved byte set
  reserved[7] = 1;
  bad.push_back(reserved);
  std::vector<uint8_t> status_set = get_frame;  // status must be 0 in requests
  status_set[5] = 3;
  bad.push_back(status_set);
  for (int k = 0; k < 20; ++k) {  // random garbage: a first byte that makes any length oversize
    auto g = random_bytes(rng, 8 + rng() % 200);
    g[0] = static_cast<uint8_t>(1 + rng() % 255);
    bad.push_back(g);
  }
  for (int k = 0; k < 20; ++k) {  // random bodies under a whole-frame length and an unknown type
    auto g = random_bytes(rng, 20 + rng() % 200);
    const uint32_t len = static_cast<uint32_t>(g.size() - 4);
    g[0] = 0;
    g[1] = 0;
    g[2] = static_cast<uint8_t>(len >> 8);
    g[3] = static_cast<uint8_t>(len);
    g[4] = static_cast<uint8_t>(8 + rng() % 248);
    bad.push_back(g);
  }

  uint64_t closed = 0;
  for (const auto& g : bad) {
    FrameClient conn(port, 0);
    conn.send_raw(g);
    OwnedResponse resp;
    const bool answered = conn.read_one(resp);
    CHECK_FALSE(answered);  // the server closes the connection, it does not answer garbage
    closed += !answered;
  }

  // Half a frame, then close; the same before any handshake; garbage before the handshake.
  {
    FrameClient half(port, 0);
    half.send_raw({get_frame.begin(), get_frame.begin() + 11});
  }
  for (int k = 0; k < 5; ++k) {
    const int fd = tcp_connect(port);
    send_all(fd, std::string(reinterpret_cast<const char*>(get_frame.data()), 9));
    close(fd);
  }
  for (int k = 0; k < 5; ++k) {
    const int fd = tcp_connect(port);
    const auto g = random_bytes(rng, 64);
    send_all(fd, std::string(g.begin(), g.end()));
    CHECK(wait_closed(fd, std::chrono::seconds(10)) >= 0);
    close(fd);
  }

  // 200 connections that say nothing: 32 (the cap on handshakes from one address) wait for the
  // handshake timeout, the rest are closed at once; every one is closed, while the good
  // connection keeps being served.
  std::vector<int> silent;
  for (int k = 0; k < 200; ++k) silent.push_back(tcp_connect(port));
  auto stored = good.call({upsert});
  REQUIRE(stored.size() == 1);
  const bool shard0 = stored[0].r.status == frame::FrameStatus::kOk;
  CHECK((shard0 || stored[0].r.status == frame::FrameStatus::kWrongShard));
  size_t silent_closed = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (int fd : silent) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() > 0 && wait_closed(fd, left) >= 0) ++silent_closed;
    close(fd);
  }
  CHECK(silent_closed == silent.size());

  FrameClient other(port, 1);  // a fresh connection is accepted and served
  auto ping = other.call({frame::Request{.type = frame::FrameType::kPing, .correlation = 3}});
  REQUIRE(ping.size() == 1);
  CHECK(ping[0].r.status == frame::FrameStatus::kOk);
  auto again = good.call({frame::Request{.type = frame::FrameType::kPing, .correlation = 4}});
  REQUIRE(again.size() == 1);
  CHECK(again[0].r.status == frame::FrameStatus::kOk);

  auto stats = good.call({frame::Request{.type = frame::FrameType::kStats, .correlation = 5}});
  REQUIRE(stats.size() == 1);
  const uint64_t bad_frames = stats[0].r.stats[frame::kStatBadFrames];
  MESSAGE("hash_server: " << bad.size() << " malformed frames sent, " << closed
                          << " connections closed, bad_frames = " << bad_frames << "; "
                          << silent_closed << "/200 silent connections closed by the timeout");
  CHECK(bad_frames == bad.size());
  CHECK(server.running());
  CHECK(server.stop(SIGTERM) == 0);
}

TEST_CASE("hostile: malformed JSON, oversized requests and slowloris at the admin API") {
  ConfigCluster c;
  c.start_config();
  const uint16_t admin = port_of(c.admin_address());
  constexpr size_t kSmall = 4096;  // every reply to hostile input is bounded and small

  // A few slow connections that never finish their headers, held open through the whole test.
  std::vector<int> slow;
  for (int k = 0; k < 8; ++k) {
    slow.push_back(tcp_connect(admin));
    send_all(slow.back(), "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  }

  struct Case {
    std::string what;
    std::string head;
    std::string body;
    int expect;  // 0: any 4xx, or a close without a reply
  };
  std::vector<Case> cases = {
      {"invalid JSON", post("/v1/assign", "{\"lo\": 1, \"hi\": "), "", 400},
      {"JSON that is not an object", post("/v1/mode", "[1, 2, 3]"), "", 400},
      {"wrong types", post("/v1/assign", R"({"lo": "one", "hi": [], "server": 5})"), "", 400},
      {"wrong type for mode", post("/v1/mode", R"({"mode": 7})"), "", 400},
      {"deep nesting", post("/v1/servers", std::string(5000, '[') + std::string(5000, ']')), "",
       400},
      {"NUL bytes", post("/v1/mode", std::string("{\"mode\": \"ring\0\"}", 17)), "", 400},
      {"2 MiB body",
       "POST /v1/servers HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
       "Content-Length: 2097152\r\nConnection: close\r\n\r\n",
       std::string(2u << 20, ' '), 413},
      {"16 KiB header",
       "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Junk: " + std::string(16384, 'a') +
           "\r\nConnection: close\r\n\r\n",
       "", 431},
      {"not HTTP", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", "", 0},
      {"binary junk", "", "", 0},
  };
  std::mt19937_64 rng(kSeed);
  const auto junk = random_bytes(rng, 3000);
  cases.back().head.assign(junk.begin(), junk.end());
  cases.back().head += "\r\n\r\n";

  for (const auto& k : cases) {
    const RawHttpReply r = raw_http_exchange(admin, k.head, k.body);
    INFO(k.what << ": " << r.text.substr(0, 200));
    CHECK(r.bytes <= kSmall);
    if (k.expect != 0) {
      CHECK(r.status == k.expect);
    } else {
      CHECK((r.status == 0 || (r.status >= 400 && r.status < 500)));
      CHECK(r.closed);
    }
    MESSAGE("admin API, " << k.what << ": status " << r.status << ", " << r.bytes << " bytes back");
  }

  // Still serving, the slow connections notwithstanding.
  const RawHttpReply ok = raw_http_exchange(admin, kGetStatus);
  CHECK(ok.status == 200);
  CHECK(c.imctl({"status"}).exit_code == 0);

  // The slow connections are closed by the request timeout (10 s), with at most a short reply.
  size_t slow_closed = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(25);
  for (int fd : slow) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const long got = left.count() > 0 ? wait_closed(fd, left) : -1;
    if (got >= 0 && static_cast<size_t>(got) <= kSmall) ++slow_closed;
    close(fd);
  }
  CHECK(slow_closed == slow.size());
  MESSAGE("admin API: " << slow_closed << "/" << slow.size() << " slowloris connections closed");
  CHECK(raw_http_exchange(admin, kGetStatus).status == 200);
  CHECK(c.config().running());
}

TEST_CASE("hostile: cross-site, rebinding and tokenless requests change nothing at the admin API") {
  const std::string token_file = "admin_token." + std::to_string(getpid());
  std::ofstream(token_file) << "hostile-test-token-0123456789\n";
  ::chmod(token_file.c_str(), 0600);
  ConfigCluster c(ConfigClusterOptions{.admin_token_file = token_file});
  const uint16_t udp = c.start_serving(2);
  const uint64_t version = c.version();
  UdpClient client(udp);
  for (uint64_t id = 1; id <= 300; ++id) {
    auto r = client.call(UdpClient::make(client::Op::kLogin, id, Endpoint::v4(0x0a000001, 5000)));
    REQUIRE(r);
    REQUIRE(r->status == client::Status::kOk);
  }
  const uint16_t admin = port_of(c.admin_address());
  const auto request = [](const std::string& path, const std::string& headers,
                          const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\n" + headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
           body;
  };
  const std::string purge_all = R"({"server": "hash1", "kind": "all"})";
  const std::string remove = R"({"names": ["hash2"]})";
  struct Attack {
    const char* what;
    std::string raw;
    int status;
  };
  const std::vector<Attack> attacks = {
      {"a web page's form post (text/plain, foreign Origin)",
       request("/v1/purge",
               "Host: 127.0.0.1:" + std::to_string(admin) +
                   "\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n",
               purge_all),
       403},
      {"text/plain without an Origin",
       request("/v1/purge", "Host: 127.0.0.1\r\nContent-Type: text/plain\r\n", purge_all), 415},
      {"DNS rebinding (Host evil.example)",
       request("/v1/servers/remove",
               "Host: evil.example:" + std::to_string(admin) +
                   "\r\nContent-Type: application/json\r\nAuthorization: Bearer "
                   "hostile-test-token-0123456789\r\n",
               remove),
       403},
      {"JSON without the token",
       request("/v1/purge", "Host: 127.0.0.1\r\nContent-Type: application/json\r\n", purge_all),
       401},
      {"JSON with a wrong token",
       request("/v1/servers/remove",
               "Host: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer "
               "hostile-test-token-0123456780\r\n",
               remove),
       401},
  };
  for (const Attack& a : attacks) {
    CAPTURE(a.what);
    CHECK(raw_http_exchange(admin, a.raw).status == a.status);
  }
  // imctl without the token can read, not change.
  const std::string err_log = token_file + ".imctl.err";
  ChildProcess tokenless(IMHASH_IMCTL, {"--admin", c.admin_address(), "purge", "hash1", "--all"},
                         {.stderr_log = err_log});
  tokenless.read_all();
  CHECK(tokenless.stop(0) == 1);
  std::ostringstream said;
  said << std::ifstream(err_log).rdbuf();
  CAPTURE(said.str());
  CHECK(said.str().find("admin token") != std::string::npos);
  ChildProcess reader(IMHASH_IMCTL, {"--admin", c.admin_address(), "status"});
  reader.read_all();
  CHECK(reader.stop(0) == 0);

  // Nothing changed: same version, every user still there.
  CHECK(c.version() == version);
  for (uint64_t id = 1; id <= 300; ++id) {
    auto r = client.call(UdpClient::make(client::Op::kLookup, id));
    REQUIRE(r);
    CHECK(r->status == client::Status::kOk);
  }
  // The operator with the token can (ConfigCluster's imctl passes --token-file).
  CHECK(c.imctl({"split", "1000"}).exit_code == 0);
  CHECK(c.version() == version + 1);
  ::unlink(token_file.c_str());
}
