#include "harness/udp_client.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "harness/loopback.h"

namespace imhash::test {

UdpClient::UdpClient(uint16_t port) {
  fd_ = connect_loopback(SOCK_DGRAM | SOCK_CLOEXEC, port);
  if (fd_ < 0) throw std::runtime_error("udp connect failed");
}

UdpClient::~UdpClient() { close(fd_); }

client::Message UdpClient::make(client::Op op, uint64_t user, std::optional<Endpoint> endpoint) {
  client::Message m;
  m.op = op;
  m.user_id = user;
  m.endpoint = endpoint;
  return m;
}

std::vector<uint8_t> UdpClient::call_raw(const std::vector<uint8_t>& bytes,
                                         std::chrono::milliseconds wait) {
  send(fd_, bytes.data(), bytes.size(), 0);
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
  std::vector<uint8_t> buf(65536);
  const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

std::optional<client::Message> UdpClient::call(client::Message m, std::chrono::milliseconds wait) {
  m.request_id = next_id_++;
  std::vector<uint8_t> out(256);
  out.resize(client::encode_request(m, out));
  send(fd_, out.data(), out.size(), 0);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
    uint8_t buf[2048];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) continue;
    auto d = client::decode_response({buf, static_cast<size_t>(n)});
    if (d.header_valid && d.header.request_id == m.request_id) {
      if (d.error != client::DecodeError::kOk) {
        // A header-only error reply to an op we sent still decodes; anything else is a bug.
        throw std::runtime_error("undecodable reply");
      }
      return d.msg;
    }
  }
}

}  // namespace imhash::test
