// Must not compile with common/codec/core_only.h force-included (tests/CMakeLists.txt).
#include <chrono>

long long now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
