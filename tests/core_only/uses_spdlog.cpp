// Must not compile with common/core_only.h force-included (tests/CMakeLists.txt).
#include <spdlog/spdlog.h>
