// What both of lossy_relay's adapters (main.cpp: UDP; link_relay.cpp: a link) need of the system:
// an error with errno's words, and the signals that stop them as a file descriptor for epoll.
// The main thread, before any other starts.
#pragma once

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>

#include <boost/system/system_error.hpp>
#include <cerrno>
#include <cstdint>
#include <string>

namespace imhash::relay_io {

[[noreturn]] inline void throw_errno(const std::string& what) {
  throw boost::system::system_error(errno, boost::system::system_category(), what);
}

// Blocks SIGINT and SIGTERM and returns a non-blocking signalfd that reads them.
inline int stop_signal_fd() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) throw_errno("sigprocmask");
  const int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) throw_errno("signalfd");
  return fd;
}

// Adds `fd` to the epoll set `epoll_fd`, readable events reported with `id`.
inline void watch(int epoll_fd, int fd, uint64_t id) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl");
}

}  // namespace imhash::relay_io
