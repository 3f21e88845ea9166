#include "harness/tcp_proxy.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include "harness/loopback.h"

namespace imhash::test {

TcpProxy::TcpProxy(uint16_t target_port) : target_(target_port) {
  listen_fd_ = bind_loopback(SOCK_STREAM | SOCK_CLOEXEC, port_);
  if (listen_fd_ < 0 || listen(listen_fd_, 16) != 0)
    throw std::runtime_error("proxy: cannot listen");
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  thread_.join();
  close(listen_fd_);
}

void TcpProxy::pause() {
  paused_ = true;
  // Two full rounds: the one in progress may have seen the flag unset.
  const uint64_t start = rounds_;
  while (rounds_ < start + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void TcpProxy::run() {
  struct Pair {
    int a, b;
    bool dead = false;
  };
  std::vector<Pair> pairs;
  while (!stop_) {
    ++rounds_;
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    if (!paused_) {
      for (auto& p : pairs) {
        fds.push_back({p.a, POLLIN, 0});
        fds.push_back({p.b, POLLIN, 0});
      }
    }
    if (poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int in = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      const int out = in >= 0 ? connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, target_) : -1;
      if (out >= 0) {
        pairs.push_back({in, out});
      } else if (in >= 0) {
        close(in);
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Pair& p = pairs[(i - 1) / 2];
      const int from = (i % 2) ? p.a : p.b;
      const int to = (i % 2) ? p.b : p.a;
      char buf[65536];
      const ssize_t n = read(from, buf, sizeof buf);
      if (n > 0) {
        const std::lock_guard lock(mutex_);
        captured_.append(buf, static_cast<size_t>(n));
      }
      if (!p.dead && (n <= 0 || send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)) {
        close(p.a);
        close(p.b);
        p.dead = true;
      }
    }
    std::erase_if(pairs, [](const Pair& p) { return p.dead; });
  }
  for (auto& p : pairs) {
    close(p.a);
    close(p.b);
  }
}

}  // namespace imhash::test
