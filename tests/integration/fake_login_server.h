// FakeLoginServer: a fake login server for udp_sim's integration tests, in a thread of the test on
// 127.0.0.1:0: a std::unordered_map store answering per docs/design.md §1 with the codec, plus
// faults on demand (a wrong endpoint for some users, dropped first tries, amplified answers, a bare
// echo). Construct, read address(), let udp_sim run, then stop() (or let the destructor do it)
// before reading the counters and the store. Its own thread serves; the counters are atomic.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/codec/client_protocol.h"
#include "harness/loopback.h"

namespace imhash::test {

struct Faults {
  // LOOKUP of these users answers OK with a wrong endpoint (port + 1).
  std::function<bool(uint64_t)> wrong_endpoint;
  // The first datagram of every request_id divisible by this is dropped (0: none).
  uint32_t drop_first_of_every = 0;
  // LOOKUP answers carry a TOKEN too, making them larger than the 48-byte request.
  bool amplify = false;
  // A bare echo server: every datagram goes back unchanged (what udp_sim --echo expects).
  bool echo = false;
};

// Single-threaded: the whole store in one unordered_map, no hash servers.
class FakeLoginServer {
 public:
  explicit FakeLoginServer(Faults faults = {}) : faults_(std::move(faults)) {
    fd_ = bind_loopback(SOCK_DGRAM | SOCK_CLOEXEC, port_);
    REQUIRE(fd_ >= 0);
    const int buf = 4 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeLoginServer() {
    stop();
    close(fd_);
  }

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  uint64_t received() const { return received_; }
  uint64_t dropped() const { return dropped_; }
  // Dropped requests that came again with the same request_id and the same bytes / other bytes.
  uint64_t resent_same() const { return resent_same_; }
  uint64_t resent_different() const { return resent_different_; }
  // After stop().
  const std::unordered_map<uint64_t, Endpoint>& store() const { return store_; }

 private:
  static constexpr unsigned kBatch = 64;

  static Endpoint source_of(const sockaddr_storage& ss) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    return Endpoint::v4(ntohl(in.sin_addr.s_addr), ntohs(in.sin_port));
  }

  // Returns the reply's length in `out`, or 0 for no reply.
  size_t handle(std::span<const uint8_t> in, const sockaddr_storage& from, std::span<uint8_t> out) {
    ++received_;
    if (faults_.echo) {
      std::memcpy(out.data(), in.data(), std::min(in.size(), out.size()));
      return std::min(in.size(), out.size());
    }
    const client::Decoded d = client::decode_request(in);
    if (d.error != client::DecodeError::kOk) {
      const auto status = client::error_reply_status(d.error);
      return status ? client::encode_error_reply(d.header, *status, out) : 0;
    }
    const client::Message& q = d.msg;
    if (faults_.drop_first_of_every && q.request_id % faults_.drop_first_of_every == 0) {
      const uint64_t key = uint64_t{source_of(from).port} << 32 | q.request_id;
      std::vector<uint8_t> bytes(in.begin(), in.end());
      auto [it, fresh] = dropped_requests_.try_emplace(key, bytes);
      if (fresh) {
        ++dropped_;
        return 0;
      }
      ++(it->second == bytes ? resent_same_ : resent_different_);
    }
    client::Message r;
    r.op = q.op;
    r.response = true;
    r.request_id = q.request_id;
    r.user_id = q.user_id;
    switch (q.op) {
      case client::Op::kLogin:
      case client::Op::kHeartbeat:
        r.endpoint = q.endpoint ? q.endpoint->unmapped() : source_of(from);
        store_[q.user_id] = *r.endpoint;
        break;
      case client::Op::kLookup: {
        const auto it = store_.find(q.user_id);
        if (it == store_.end()) {
          r.status = client::Status::kNotFound;
          break;
        }
        r.endpoint = it->second;
        r.age = 0;
        if (faults_.wrong_endpoint && faults_.wrong_endpoint(q.user_id)) {
          r.endpoint->port = static_cast<uint16_t>(r.endpoint->port + 1);
        }
        if (faults_.amplify) r.token = client::Token{q.user_id, 0, {}};
        break;
      }
      case client::Op::kLogout:
        store_.erase(q.user_id);
        break;
      case client::Op::kPing:
        r.table_version = 1;
        break;
    }
    return client::encode_response(r, out);
  }

  void loop() {
    std::vector<std::array<uint8_t, 2048>> in(kBatch);
    std::vector<std::array<uint8_t, 128>> out(kBatch);
    std::vector<sockaddr_storage> from(kBatch);
    std::vector<mmsghdr> rx(kBatch), tx(kBatch);
    std::vector<iovec> rx_iov(kBatch), tx_iov(kBatch);
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      for (unsigned i = 0; i < kBatch; ++i) {
        rx_iov[i] = iovec{in[i].data(), in[i].size()};
        rx[i] = mmsghdr{};
        rx[i].msg_hdr.msg_name = &from[i];
        rx[i].msg_hdr.msg_namelen = sizeof from[i];
        rx[i].msg_hdr.msg_iov = &rx_iov[i];
        rx[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = recvmmsg(fd_, rx.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) continue;
      unsigned m = 0;
      for (int i = 0; i < n; ++i) {
        const size_t len = handle({in[i].data(), rx[i].msg_len}, from[i], out[m]);
        if (len == 0) continue;
        tx_iov[m] = iovec{out[m].data(), len};
        tx[m] = mmsghdr{};
        tx[m].msg_hdr.msg_name = &from[i];
        tx[m].msg_hdr.msg_namelen = rx[i].msg_hdr.msg_namelen;
        tx[m].msg_hdr.msg_iov = &tx_iov[m];
        tx[m].msg_hdr.msg_iovlen = 1;
        ++m;
      }
      for (unsigned sent = 0; sent < m;) {
        const int r = sendmmsg(fd_, tx.data() + sent, m - sent, 0);
        if (r <= 0) break;  // a full client buffer: the client retries
        sent += static_cast<unsigned>(r);
      }
    }
  }

  Faults faults_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> resent_same_{0};
  std::atomic<uint64_t> resent_different_{0};
  // Server thread only, until stop().
  std::unordered_map<uint64_t, Endpoint> store_;
  std::unordered_map<uint64_t, std::vector<uint8_t>> dropped_requests_;
};

}  // namespace imhash::test
