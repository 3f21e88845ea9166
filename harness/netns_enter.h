// Entering a network namespace that `ip netns` made (/run/netns/NAME; harness/netns.h makes them):
// the harness's one way of doing it, for a forked child before it execs (ChildProcess, the members
// of an EtcdCluster) and for a call that must be made from a host rather than from the test's own
// namespace (in_netns: an etcd member's health, a probe between hosts). setns(2) needs
// CAP_SYS_ADMIN. Any thread.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace imhash::test {

// Opens /run/netns/NAME (O_CLOEXEC) for enter_netns; throws std::runtime_error naming it and why
// if it cannot. The caller closes the descriptor.
int open_netns(const std::string& name);

// Moves the calling thread into the network namespace `fd` refers to; false if it cannot (errno
// says why). Only a system call: a child between fork and exec may call it.
bool enter_netns(int fd) noexcept;

// Runs `fn` on a thread of its own that entered network namespace `name` (`name` empty: on the
// calling thread, in its own namespace), waits for it, and rethrows what it threw. The calling
// thread never changes namespace; a socket `fn` makes stays in `name` after it returns.
void run_in_netns(const std::string& name, const std::function<void()>& fn);

// The same for a function that returns a value: that value.
template <typename Fn>
auto in_netns(const std::string& name, Fn&& fn) {
  std::optional<decltype(fn())> result;
  run_in_netns(name, [&] { result.emplace(fn()); });
  return std::move(*result);
}

}  // namespace imhash::test
