// Must not compile with config_server/core_only.h force-included (tests/CMakeLists.txt).
#include <boost/beast/http/verb.hpp>
