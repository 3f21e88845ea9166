// FrameClient: a blocking TCP client of the login<->hash frame protocol, for integration tests.
// Connects to 127.0.0.1:port, binds to one shard with HELLO (with a cluster key: HELLO, the
// server's proof checked, AUTH; common/security/link_auth.h), then sends batches of requests and
// reads their responses. Used from one thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/codec/frame_protocol.h"

namespace imhash::test {

// A response whose string_view fields point into owned storage.
struct OwnedResponse {
  frame::Response r;
  std::vector<uint8_t> raw;
};

class FrameClient {
 public:
  // Throws std::runtime_error if the handshake is refused (the message names the status).
  FrameClient(uint16_t port, uint16_t shard, const std::string& name = "test",
              std::span<const uint8_t> cluster_key = {});
  ~FrameClient();
  FrameClient(const FrameClient&) = delete;
  FrameClient& operator=(const FrameClient&) = delete;

  const frame::Response& hello() const { return hello_.r; }
  // Sends all requests with one write, then reads exactly that many responses.
  std::vector<OwnedResponse> call(const std::vector<frame::Request>& requests);
  void send_raw(const std::vector<uint8_t>& bytes);
  // Reads one response; returns false when the server closed the connection.
  bool read_one(OwnedResponse& out);
  // One counter of the shard (a STATS request); throws unless the shard answers OK.
  uint64_t stat(frame::StatIndex i);

 private:
  int fd_ = -1;
  StreamBuffer in_{4 + frame::kMaxFrameLength + 64 * 1024};
  OwnedResponse hello_;
};

}  // namespace imhash::test
