// Addresses as text: the one formatter (IPv6 in brackets), the port parser, the HOST:PORT check a
// routing table applies, and Endpoint::to_string built on them.
#include "common/codec/endpoint.h"

#include <doctest/doctest.h>

#include <string>

using namespace imhash;

TEST_CASE("endpoint: format_host_port brackets IPv6 literals only") {
  CHECK(format_host_port("127.0.0.1", 7000) == "127.0.0.1:7000");
  CHECK(format_host_port("localhost", 0) == "localhost:0");
  CHECK(format_host_port("::1", 7001) == "[::1]:7001");
  CHECK(format_host_port("fe80::1%eth0", 65535) == "[fe80::1%eth0]:65535");
  CHECK(format_host_port("::ffff:10.0.0.1", 9) == "[::ffff:10.0.0.1]:9");
  CHECK(format_host_port("", 80) == ":80");
}

TEST_CASE("endpoint: Endpoint::to_string") {
  CHECK(Endpoint::v4(0x7f000001, 80).to_string() == "127.0.0.1:80");
  std::array<uint8_t, 16> loopback{};
  loopback[15] = 1;
  CHECK(Endpoint::v6(loopback, 9000).to_string() == "[::1]:9000");
  CHECK(Endpoint{}.to_string() == "none");
}

TEST_CASE("endpoint: parse_port takes 0..65535 in decimal and nothing else") {
  CHECK(parse_port("0") == uint16_t{0});
  CHECK(parse_port("65535") == uint16_t{65535});
  CHECK(parse_port("007") == uint16_t{7});
  for (const char* bad : {"", "65536", "-1", "+1", " 1", "1 ", "1a", "0x10", "99999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_port(bad));
  }
}

TEST_CASE("endpoint: check_host_port says what is wrong with a table address") {
  for (const char* good : {"h:1", "127.0.0.1:65535", "[::1]:7001", "example.com:80"}) {
    CAPTURE(good);
    CHECK(check_host_port(good) == "");
  }
  CHECK(check_host_port("") == "is empty");
  CHECK(check_host_port(std::string(250, 'a') + ":12345") == "is longer than 255 characters");
  CHECK(check_host_port("a b:1") == "contains a space, a control or a non-ASCII character");
  CHECK(check_host_port("h\x01:1") == "contains a space, a control or a non-ASCII character");
  CHECK(check_host_port("h\xc3\xa9:1") == "contains a space, a control or a non-ASCII character");
  CHECK(check_host_port("nohost") == "is not HOST:PORT");
  CHECK(check_host_port(":80") == "is not HOST:PORT");
  for (const char* bad : {"h:", "h:0", "h:65536", "h:x", "h:-1"}) {
    CAPTURE(bad);
    CHECK(check_host_port(bad) == "does not end in a port between 1 and 65535");
  }
}

TEST_CASE("endpoint: is_unspecified_host finds the any-addresses a listener binds") {
  for (const char* host : {"0.0.0.0", "0", "0.0", "::", "[::]", "::0", "0:0:0:0:0:0:0:0",
                           "::ffff:0.0.0.0", "[::ffff:0.0.0.0]"}) {
    CAPTURE(host);
    CHECK(is_unspecified_host(host));
  }
  for (const char* host : {"127.0.0.1", "10.0.0.11", "::1", "[::1]", "localhost", "hash1.example",
                           "", "[]", "0.0.0.1", "::ffff:10.0.0.1"}) {
    CAPTURE(host);
    CHECK_FALSE(is_unspecified_host(host));
  }
  CHECK(is_unspecified_address("0.0.0.0:7001"));
  CHECK(is_unspecified_address("[::]:7001"));
  CHECK_FALSE(is_unspecified_address("10.0.0.11:7001"));
  CHECK_FALSE(is_unspecified_address("[::1]:7001"));
  CHECK_FALSE(is_unspecified_address("no-port"));
}

TEST_CASE("endpoint: parse_endpoint reads back what Endpoint::to_string wrote") {
  std::array<uint8_t, 16> doc{0x20, 0x01, 0x0d, 0xb8};
  doc[15] = 1;
  std::array<uint8_t, 16> mapped{};
  mapped[10] = mapped[11] = 0xff;
  mapped[12] = 10;
  mapped[15] = 1;
  for (const Endpoint& e :
       {Endpoint::v4(0x0a000007, 4242), Endpoint::v4(0, 0), Endpoint::v4(0xffffffff, 65535),
        Endpoint::v6(doc, 443), Endpoint::v6({}, 1), Endpoint::v6(mapped, 9)}) {
    CAPTURE(e.to_string());
    CHECK(parse_endpoint(e.to_string()) == e);
  }
  CHECK(parse_endpoint("[::ffff:10.0.0.1]:9") == Endpoint::v6(mapped, 9));  // stays family 6
  CHECK(parse_endpoint("[2001:0db8:0::1]:443") == Endpoint::v6(doc, 443));  // not canonical
  const auto refused = [](const char* text) {
    CAPTURE(text);
    CHECK_FALSE(parse_endpoint(text));
  };
  for (const char* no_port : {"", ":", "10.0.0.7", "10.0.0.7:", "[::1]", "[::1]:", "none", "-"}) {
    refused(no_port);
  }
  for (const char* bad_port : {"10.0.0.7:65536", "10.0.0.7:-1", "10.0.0.7:+1", "10.0.0.7:1 "}) {
    refused(bad_port);
  }
  for (const char* bad_v4 : {" 10.0.0.7:1", "10.0.0:1", "10.0.0.256:1", "localhost:80"}) {
    refused(bad_v4);
  }
  for (const char* bad_v6 : {"::1:80", "[10.0.0.7]:80", "[::1:80", "::1]:80", "[]:80"}) {
    refused(bad_v6);
  }
  refused("[fe80::1%eth0]:80");  // a zone: no Endpoint holds one
}
