// SIGTERM ends every daemon within 5 s whatever its peers do (issue 15): a config server with a
// node connection that never registers, a hash server whose client does not read its answers.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/codec/frame_protocol.h"
#include "harness/child_process.h"
#include "harness/cluster.h"
#include "harness/loopback.h"

using namespace imhash;
using namespace imhash::test;
using namespace std::chrono_literals;

TEST_CASE("shutdown: a config server with a silent, unregistered node connection ends on SIGTERM") {
  const std::string dir = "shutdown_state." + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  ChildProcess config(IMHASH_CONFIG_SERVER,
                      {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", dir});
  const auto addrs = config.wait_listening(2);
  std::vector<int> silent;
  for (int i = 0; i < 4; ++i) {
    silent.push_back(connect_loopback(SOCK_STREAM, port_of(addrs[0])));
    REQUIRE(silent.back() >= 0);
  }
  CHECK(config.stop(SIGTERM, 5s) == 0);  // 137 would mean it had to be killed
  for (int fd : silent) close(fd);
  std::filesystem::remove_all(dir);
}

TEST_CASE("shutdown: a hash server whose client never reads its answers ends on SIGTERM") {
  Cluster cluster(ClusterOptions{.hash_servers = 1, .shards = 1});
  const int fd = connect_loopback(SOCK_STREAM, port_of(cluster.hash_address(0)));
  REQUIRE(fd >= 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::vector<uint8_t> out;
  frame::Request hello{.type = frame::FrameType::kHello,
                       .correlation = 0,
                       .protocol_version = frame::kProtocolVersion};
  hello.name = "shutdown_test";
  frame::append_request(hello, out);
  // Pipelined GETs, never read: the answers fill both socket buffers and the shard's write waits.
  for (uint32_t i = 1; i <= 4096; ++i) {
    frame::append_request(frame::Request{.type = frame::FrameType::kGet, .correlation = i, .id = i},
                          out);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  size_t sent_batches = 0;
  for (int round = 0; round < 2000; ++round) {  // bounded: at most 2000 batches
    const ssize_t n = send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN) break;
      std::this_thread::sleep_for(1ms);
      if (++sent_batches > 50) break;  // the server stopped reading: its writes are blocked
      continue;
    }
    out.erase(out.begin(), out.begin() + n);
    if (out.empty()) {
      for (uint32_t i = 1; i <= 4096; ++i) {
        frame::append_request(
            frame::Request{.type = frame::FrameType::kGet, .correlation = i, .id = i}, out);
      }
    }
  }
  CHECK(cluster.hash(0).stop(SIGTERM, 5s) == 0);
  close(fd);
}
