// load_size: how many users a test's biggest loads have in this build. Any thread may call it.
//
// Under AddressSanitizer every daemon runs several times slower, and CI runs the same suite on two
// cores in the sanitizer tree after the optimised one: there, the loads of 30k users and more whose
// size the test does not depend on (no stream that must outlast a restart or race a LOGOUT) run at
// a third of their size. That is still thousands of stream batches, purge passes and
// datagrams per server, checked the same way, and what the sanitizers look for (a bad access, a
// leak, undefined behaviour) is in the code paths, not in the count; the optimised trees run the
// loads in full. docs/development.md has the figures.
#pragma once

#include <cstdint>

namespace imhash::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

constexpr uint64_t load_size(uint64_t full) { return kSanitized ? full / 3 : full; }

}  // namespace imhash::test
