// ThreadCheck: remembers which thread owns an object and lets every entry point assert, in debug
// builds, that it runs there (dragonfly's EngineShard::IsMyThread(), Chromium's ThreadChecker).
// The imhash rule is one owner thread per stateful object and no locks on the data path
// (docs/design.md, "Threads"); these checks are how a violation shows up in the sanitizer suite
// instead of as a rare race in production.
//
// The owner is the first thread that calls owned() (or bind() explicitly, e.g. when a worker's
// thread starts); release builds (NDEBUG) compile the checks away. Any thread may call owned().
#pragma once

#include <atomic>
#include <cassert>
#include <thread>

namespace imhash {

class ThreadCheck {
 public:
  // Makes the calling thread the owner (for objects built on one thread and then handed over).
  void bind() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  // True on the owner thread; binds to the caller if there is no owner yet.
  bool owned() const {
    std::thread::id none{};
    const std::thread::id me = std::this_thread::get_id();
    return owner_.compare_exchange_strong(none, me, std::memory_order_relaxed) || none == me;
  }

 private:
  mutable std::atomic<std::thread::id> owner_{};
};

}  // namespace imhash

// Asserts (debug builds) that the calling thread owns the object. `check` is a ThreadCheck or any
// expression convertible to bool (an Asio executor's running_in_this_thread()).
#define IMHASH_ON_OWNER_THREAD(check) \
  assert(((check)) && "called from a thread that does not own this object")
