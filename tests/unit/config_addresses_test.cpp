// The config server addresses a node dials (--config A,B,C): parsed in order, errors worded for
// the flag, and the turn a ConfigLink takes through them.
#include "common/runtime/config_addresses.h"

#include <doctest/doctest.h>

#include <string>

using namespace imhash;

namespace {

std::string usage_error_of(const std::string& list) {
  try {
    ConfigAddresses::parse(list, "--config");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("config_addresses: one address or several, dialled in turn") {
  ConfigAddresses one = ConfigAddresses::parse("10.0.0.10:7000", "--config");
  CHECK(one.size() == 1);
  CHECK(one.current().host == "10.0.0.10");
  CHECK(one.current().port == 7000);
  CHECK(one.advance() == "10.0.0.10:7000");  // one address: always that one
  CHECK(one.describe() == "config server 10.0.0.10:7000");

  ConfigAddresses three = ConfigAddresses::parse("a:1, [::1]:2 ,c:3", "--config");
  CHECK(three.size() == 3);
  CHECK(three.to_string() == "a:1,[::1]:2,c:3");
  CHECK(three.current_text() == "a:1");
  CHECK(three.describe() == "config server a:1 (1 of 3)");
  CHECK(three.advance() == "[::1]:2");
  CHECK(three.current().host == "::1");
  CHECK(three.position() == 1);
  CHECK(three.advance() == "c:3");
  CHECK(three.describe() == "config server c:3 (3 of 3)");
  CHECK(three.advance() == "a:1");  // after the last, the first again
}

TEST_CASE("config_addresses: a malformed list is a usage error naming the flag") {
  CHECK(usage_error_of("") == "--config: expected HOST:PORT[,HOST:PORT...], got ''");
  CHECK(usage_error_of("a:1,") == "--config: expected HOST:PORT[,HOST:PORT...], got 'a:1,'");
  CHECK(usage_error_of("a:1,,b:2") ==
        "--config: expected HOST:PORT[,HOST:PORT...], got 'a:1,,b:2'");
  CHECK(usage_error_of("a:1,b:0") == "--config: port 0 in 'b:0'");
  CHECK(usage_error_of("a:1,a:1") == "--config: 'a:1' is listed twice");
  CHECK(usage_error_of("a:1,nohost").find("--config") == 0);
}

TEST_CASE("config_addresses: a standby's leader is dialled next when it is one of them") {
  ConfigAddresses a =
      ConfigAddresses::parse("10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000", "--config");
  CHECK(a.move_to("10.0.0.3:7000"));
  CHECK(a.current_text() == "10.0.0.3:7000");
  CHECK(a.position() == 2);
  CHECK_FALSE(a.move_to("10.0.0.9:7000"));  // not ours: stays
  CHECK(a.current_text() == "10.0.0.3:7000");
  CHECK(a.advance() == "10.0.0.1:7000");
}
