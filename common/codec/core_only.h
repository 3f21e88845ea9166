// Force-included first into every file of the pure layer and of the cores (imhash_pure() in
// CMakeLists.txt: imhash_codec, imhash_routing, imhash_security, the table edits, the etcd codec,
// node auth, the record store, the login logic, and the shard's and the config server's cores): a
// core gets its time and its links from its caller and returns what is to be logged, and the pure
// layer under it is the same, so a file there that uses Asio, Beast, spdlog or a clock does not
// compile.
#pragma once

// The standard headers that declare the clocks come first: Boost.JSON includes them, and the
// poison below must catch only what comes after.
#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>  // common/codec/thread_check.h: a core checks its owner thread

#pragma GCC poison asio beast spdlog
#pragma GCC poison steady_clock system_clock high_resolution_clock clock_gettime gettimeofday
#pragma GCC poison monotonic_ns unix_millis unix_micros
