#include "harness/netns_enter.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

namespace imhash::test {

int open_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("cannot open network namespace " + path + ": " + std::strerror(errno));
  }
  return fd;
}

bool enter_netns(int fd) noexcept { return setns(fd, CLONE_NEWNET) == 0; }

void run_in_netns(const std::string& name, const std::function<void()>& fn) {
  if (name.empty()) {
    fn();
    return;
  }
  const int fd = open_netns(name);
  std::exception_ptr error;
  try {
    // A thread of its own: setns(2) moves only the calling thread, and this one ends with the
    // call, so no other code ever runs in the wrong namespace (not even after an exception).
    std::thread([&] {
      try {
        if (!enter_netns(fd)) {
          throw std::runtime_error("setns into network namespace " + name +
                                   " failed: " + std::strerror(errno));
        }
        fn();
      } catch (...) {
        error = std::current_exception();
      }
    }).join();
  } catch (...) {  // no thread could be made
    error = std::current_exception();
  }
  close(fd);
  if (error) std::rethrow_exception(error);
}

}  // namespace imhash::test
