// Must not compile with common/codec/core_only.h force-included (tests/CMakeLists.txt).
#include <boost/beast/http/verb.hpp>
