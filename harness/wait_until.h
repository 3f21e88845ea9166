// wait_until: the one bounded wait of the tests. A test that needs something to have happened
// (a link noticed a reset, counters were sampled, a bucket refilled) polls for it with a generous
// bound and then asserts, instead of sleeping a guessed time: it asserts behaviour, never how long
// the machine took (a shared, loaded CI machine may take much longer than a quiet one).
// Used from the test's thread.
#pragma once

#include <chrono>
#include <thread>

namespace imhash::test {

// Long enough for a sanitizer build on a loaded 2-core machine; a passing test never waits it out.
inline constexpr std::chrono::milliseconds kPatience = std::chrono::seconds(30);

// Calls `condition` until it returns true (then true) or `timeout` has passed (then false),
// sleeping `interval` between calls.
template <typename Condition>
bool wait_until(Condition&& condition, std::chrono::milliseconds timeout = kPatience,
                std::chrono::milliseconds interval = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace imhash::test
