// Force-included first into every file of a core — the config server's (imhash_cluster_core,
// config_server/CMakeLists.txt) and the shard's (imhash_shard_core, hash_server/CMakeLists.txt):
// a core gets its time and its links from its caller and returns what is
// to be logged, so a file of it that uses Asio, Beast, spdlog or a clock does not compile.
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
