#include "harness/frame_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "common/security/link_auth.h"
#include "harness/loopback.h"

namespace imhash::test {

using namespace frame;

FrameClient::FrameClient(uint16_t port, uint16_t shard, const std::string& name,
                         std::span<const uint8_t> cluster_key) {
  fd_ = connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, port);
  if (fd_ < 0) throw std::runtime_error("connect failed");
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{10, 0};  // a test must never hang on a server that stopped answering
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  Request hello{.type = FrameType::kHello, .correlation = 0, .protocol_version = kProtocolVersion};
  hello.shard = shard;
  hello.name = name;
  link_auth::Transcript t{.link = "hash", .client_role = "login", .client_name = name};
  if (!cluster_key.empty()) {
    t.client_nonce = link_auth::make_nonce().value();
    hello.flags = kFlagAuth;
    hello.auth = std::string_view(reinterpret_cast<const char*>(t.client_nonce.data()),
                                  t.client_nonce.size());
  }
  std::vector<uint8_t> out;
  append_request(hello, out);
  send_raw(out);
  if (!read_one(hello_)) throw std::runtime_error("no HELLO reply");
  if (hello_.r.status != FrameStatus::kOk) {
    throw std::runtime_error(std::string("HELLO refused: ") + to_string(hello_.r.status));
  }
  if (cluster_key.empty()) return;
  if (!(hello_.r.flags & kFlagAuth) || hello_.r.auth.size() != kHelloAuthResponseSize) {
    throw std::runtime_error("the server offered no proof of the cluster key");
  }
  const std::string server_name(hello_.r.name);
  t.server_name = server_name;
  std::copy_n(hello_.r.auth.begin(), link_auth::kNonceSize, t.server_nonce.begin());
  const auto* proof =
      reinterpret_cast<const uint8_t*>(hello_.r.auth.data()) + link_auth::kNonceSize;
  if (!link_auth::verify(cluster_key, link_auth::Side::kServer, t,
                         std::span(proof, link_auth::kProofSize))) {
    throw std::runtime_error("the server's proof of the cluster key is wrong");
  }
  const auto mine = link_auth::prove(cluster_key, link_auth::Side::kClient, t).value();
  Request auth{.type = FrameType::kAuth};
  auth.auth = std::string_view(reinterpret_cast<const char*>(mine.data()), mine.size());
  out.clear();
  append_request(auth, out);
  send_raw(out);
  OwnedResponse answer;
  if (!read_one(answer)) throw std::runtime_error("no AUTH reply");
  if (answer.r.status != FrameStatus::kOk) {
    throw std::runtime_error(std::string("AUTH refused: ") + to_string(answer.r.status));
  }
}

FrameClient::~FrameClient() {
  if (fd_ >= 0) close(fd_);
}

void FrameClient::send_raw(const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send failed");
    off += static_cast<size_t>(n);
  }
}

bool FrameClient::read_one(OwnedResponse& out) {
  for (;;) {
    bool got = false;
    const DecodeStatus st = drain_frames(in_, [&](const Header& h, std::span<const uint8_t>) {
      // Keep the frame's bytes (still at the front of in_), so that the response's string
      // fields point into `out`.
      const auto frame = in_.data().first(4 + h.length);
      out.raw.assign(frame.begin(), frame.end());
      got = true;
      return false;
    });
    if (got) {
      Header h;
      std::span<const uint8_t> body;
      size_t used = 0;
      if (next_frame(out.raw, h, body, used) != DecodeStatus::kOk ||
          decode_response(h, body, out.r) != DecodeStatus::kOk) {
        throw std::runtime_error("malformed response");
      }
      return true;
    }
    if (st != DecodeStatus::kNeedMore) throw std::runtime_error("bad response frame");
    const auto space = in_.space();
    const ssize_t n = recv(fd_, space.data(), space.size(), 0);
    if (n == 0) return false;
    if (n < 0) throw std::runtime_error("recv failed or timed out");
    in_.commit(static_cast<size_t>(n));
  }
}

std::vector<OwnedResponse> FrameClient::call(const std::vector<Request>& requests) {
  std::vector<uint8_t> out;
  for (const auto& q : requests) append_request(q, out);
  send_raw(out);
  std::vector<OwnedResponse> responses(requests.size());
  for (auto& r : responses) {
    if (!read_one(r)) throw std::runtime_error("connection closed mid-batch");
  }
  return responses;
}

uint64_t FrameClient::stat(StatIndex i) {
  const auto r = call({Request{.type = FrameType::kStats, .correlation = 1}});
  if (r[0].r.status != FrameStatus::kOk) throw std::runtime_error("STATS refused");
  return r[0].r.stats[i];
}

}  // namespace imhash::test
