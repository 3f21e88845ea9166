// UdpClient: a blocking client of the public UDP protocol, for integration tests. Sends one request
// and waits (bounded) for the reply with the same request_id. Used from one thread.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "common/codec/client_protocol.h"

namespace imhash::test {

class UdpClient {
 public:
  explicit UdpClient(uint16_t port);
  ~UdpClient();
  UdpClient(const UdpClient&) = delete;
  UdpClient& operator=(const UdpClient&) = delete;

  // Sends `m` padded to 48 bytes; returns the decoded reply, or nothing after `wait`.
  std::optional<client::Message> call(client::Message m,
                                      std::chrono::milliseconds wait = std::chrono::seconds(2));
  // Sends raw bytes; returns the raw reply (empty when none came within `wait`).
  std::vector<uint8_t> call_raw(const std::vector<uint8_t>& bytes,
                                std::chrono::milliseconds wait = std::chrono::milliseconds(300));

  static client::Message make(client::Op op, uint64_t user,
                              std::optional<Endpoint> endpoint = std::nullopt);

 private:
  int fd_ = -1;
  uint32_t next_id_ = 1;
};

}  // namespace imhash::test
