#include "harness/tcp_proxy.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include "harness/loopback.h"
#include "harness/wait_until.h"

namespace imhash::test {

TcpProxy::TcpProxy(uint16_t target_port) : target_(target_port) {
  listen_fd_ = bind_loopback(SOCK_STREAM | SOCK_CLOEXEC, port_);
  if (listen_fd_ < 0 || listen(listen_fd_, 16) != 0)
    throw std::runtime_error("proxy: cannot listen");
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::runtime_error("proxy: no eventfd");
  thread_ = std::thread([this] { run(); });
}

namespace {
void wake(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(fd, &one, sizeof one);
}
}  // namespace

TcpProxy::~TcpProxy() {
  stop_ = true;
  wake(wake_fd_);
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void TcpProxy::pause() {
  paused_ = true;
  std::unique_lock lock(mutex_);
  // The round in progress may have seen the flag unset and still be forwarding; the next one
  // begins (under mutex_, after this read) once that is done, and reads the flag set.
  const uint64_t start = rounds_;
  wake(wake_fd_);
  if (!round_done_.wait_for(lock, kPatience, [&] { return rounds_ > start; })) {
    throw std::runtime_error("proxy: its thread did not see the pause");
  }
}

void TcpProxy::resume() {
  paused_ = false;
  wake(wake_fd_);  // it waits without the connections while paused
}

void TcpProxy::run() {
  struct Pair {
    int a, b;
    bool dead = false;
  };
  std::vector<Pair> pairs;
  while (!stop_) {
    {
      const std::lock_guard lock(mutex_);
      ++rounds_;
    }
    round_done_.notify_all();
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (!paused_) {
      for (auto& p : pairs) {
        fds.push_back({p.a, POLLIN, 0});
        fds.push_back({p.b, POLLIN, 0});
      }
    }
    // No timeout: pause() and the destructor wake it through wake_fd_.
    if (poll(fds.data(), fds.size(), -1) <= 0) continue;
    if (fds[1].revents & POLLIN) {
      uint64_t n = 0;
      [[maybe_unused]] const ssize_t r = read(wake_fd_, &n, sizeof n);
    }
    if (fds[0].revents & POLLIN) {
      const int in = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      const int out = in >= 0 ? connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, target_) : -1;
      if (out >= 0) {
        pairs.push_back({in, out});
      } else if (in >= 0) {
        close(in);
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Pair& p = pairs[(i - 2) / 2];
      const int from = (i % 2 == 0) ? p.a : p.b;
      const int to = (i % 2 == 0) ? p.b : p.a;
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
