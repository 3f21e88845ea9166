// TcpProxy: forwards TCP connections from a loopback port to a target, and can be paused (bytes
// wait in the kernel buffers) to play a network partition between two of our processes. Runs its
// own thread; the methods may be called from the test's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace imhash::test {

class TcpProxy {
 public:
  explicit TcpProxy(uint16_t target_port);
  ~TcpProxy();
  uint16_t port() const { return port_; }
  // Returns once no byte crosses the proxy any more (throws std::runtime_error if its thread does
  // not get round to it within kPatience).
  void pause();
  void resume();
  // Every byte that crossed the proxy so far, both directions (what a wiretap would see).
  std::string captured() const {
    const std::lock_guard lock(mutex_);
    return captured_;
  }

 private:
  void run();
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  uint16_t target_;
  std::atomic<bool> paused_{false};
  int wake_fd_ = -1;  // an eventfd: pause() and the destructor wake the thread's poll with it
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::condition_variable round_done_;  // notified after each loop iteration
  uint64_t rounds_ = 0;                 // loop iterations, to know the thread saw `paused_`; mutex_
  std::string captured_;                // guarded by mutex_
  std::thread thread_;
};

}  // namespace imhash::test
