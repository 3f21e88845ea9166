#include "login_server/rate_limiter.h"

#include <doctest/doctest.h>

using namespace imhash;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000 * kMs;

Endpoint v4(uint32_t a, uint16_t port = 1) { return Endpoint::v4(a, port); }

int allowed(RateLimiter& l, const Endpoint& e, int n, int64_t now) {
  int ok = 0;
  for (int i = 0; i < n; ++i) ok += l.allow(e, now) ? 1 : 0;
  return ok;
}

}  // namespace

TEST_CASE("rate_limiter: a new source gets the burst, then the rate") {
  RateLimiter l({.rate = 1000, .burst = 100});
  const auto a = v4(0x0a000001);
  CHECK(allowed(l, a, 150, 0) == 100);
  CHECK_FALSE(l.allow(a, 0));
  // 1000/s: one token per millisecond.
  CHECK(allowed(l, a, 5, 1 * kMs) == 1);
  CHECK(allowed(l, a, 20, 11 * kMs) == 10);
  CHECK(allowed(l, a, 5, 11 * kMs + kMs / 2) == 0);  // half a token
  CHECK(allowed(l, a, 5, 12 * kMs) == 1);            // the two halves make one
  // A long quiet spell refills to the burst, never beyond.
  CHECK(allowed(l, a, 1000, 3600 * kSec) == 100);
}

TEST_CASE("rate_limiter: sustained rate over a second") {
  RateLimiter l({.rate = 20000, .burst = 40000});
  const auto a = v4(0x0a000001);
  int ok = 0;
  // 100k requests spread evenly over one second: burst 40000 + 20000 refilled.
  for (int i = 0; i < 100000; ++i) ok += l.allow(a, int64_t{i} * 10'000) ? 1 : 0;
  CHECK(ok >= 59990);
  CHECK(ok <= 60001);
}

TEST_CASE("rate_limiter: keyed by address, not port, and by family") {
  RateLimiter l({.rate = 10, .burst = 3});
  CHECK(l.allow(v4(0x0a000001, 1), 0));
  CHECK(l.allow(v4(0x0a000001, 2), 0));
  CHECK(l.allow(v4(0x0a000001, 3), 0));
  CHECK_FALSE(l.allow(v4(0x0a000001, 4), 0));  // same address, other port: same bucket
  CHECK(l.allow(v4(0x0a000002, 1), 0));        // another address: its own bucket
  std::array<uint8_t, 16> a6{};
  a6[0] = 0x0a;
  a6[3] = 0x01;  // same first bytes as 10.0.0.1, but IPv6
  CHECK(l.allow(Endpoint::v6(a6, 1), 0));
  CHECK(l.tracked() == 3u);
}

TEST_CASE("rate_limiter: rate 0 is off") {
  RateLimiter l({.rate = 0, .burst = 0});
  CHECK_FALSE(l.enabled());
  CHECK(allowed(l, v4(1), 100000, 0) == 100000);
  CHECK(l.memory_bytes() == 0u);
}

TEST_CASE("rate_limiter: bounded table evicts the least recently refilled source") {
  RateLimiter l({.rate = 1, .burst = 1}, 64);
  CHECK(l.capacity() == 64u);
  const size_t bytes = l.memory_bytes();
  CHECK(bytes > 0u);
  // A million distinct sources: the table never grows, evictions keep it full.
  uint32_t refused = 0;
  for (uint32_t i = 0; i < 1'000'000; ++i)
    refused += l.allow(v4(0x0b000000 + i), int64_t{i}) ? 0 : 1;
  CHECK(refused == 0u);
  CHECK(l.tracked() == 64u);
  CHECK(l.evictions() == 1'000'000u - 64u);
  CHECK(l.memory_bytes() == bytes);

  // A busy source survives a scan of new sources hitting its set: it is refilled most recently.
  RateLimiter s({.rate = 1, .burst = 1}, RateLimiter::kWays);  // one set of kWays
  const auto busy = v4(0x0c000001);
  CHECK(s.allow(busy, 0));
  int64_t t = 1;
  for (uint32_t i = 0; i < 100; ++i) {
    CHECK_FALSE(s.allow(busy, t++));  // empty bucket: still tracked, so still limited
    CHECK(s.allow(v4(0x0d000000 + i), t++));
  }
  CHECK(s.tracked() == RateLimiter::kWays);
}

TEST_CASE("rate_limiter: capacity rounds up to a power of two") {
  CHECK(RateLimiter({.rate = 1, .burst = 1}, 1).capacity() == RateLimiter::kWays);
  CHECK(RateLimiter({.rate = 1, .burst = 1}, 65536).capacity() == 65536u);
  CHECK(RateLimiter({.rate = 1, .burst = 1}, 65537).capacity() == 131072u);
}

TEST_CASE(
    "rate_limiter: a source over its limit is refused at most 10 times a second, then dropped") {
  RateLimiter l({.rate = 100, .burst = 10});
  const Endpoint a = v4(0x0a000001);
  using V = RateLimiter::Verdict;
  // One second of a flood at 1M requests/s: 10 burst + 100 refilled are served, and the
  // RATE_LIMITED answers are bounded by the refusal rate, not by the flood.
  int served = 0, refused = 0, dropped = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    switch (l.admit(a, int64_t{i} * 1000)) {
      case V::kAllow:
        ++served;
        break;
      case V::kRefuse:
        ++refused;
        break;
      case V::kDrop:
        ++dropped;
        break;
    }
  }
  CHECK(served >= 109);
  CHECK(served <= 111);
  CHECK(refused >= 9);
  CHECK(refused <= int{RateLimiter::kRefusalsPerSecond} + 1);
  CHECK(served + refused + dropped == 1'000'000);
  // Another source is not affected by a's refusals.
  CHECK(l.admit(v4(0x0a000002), 1'000'000'000) == V::kAllow);
}

TEST_CASE("rate_limiter: IPv6 sources share a bucket per prefix (default /64)") {
  std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2};
  auto host = [&](uint8_t low, uint8_t prefix_byte7 = 2) {
    std::array<uint8_t, 16> x = a;
    x[7] = prefix_byte7;
    x[15] = low;
    x[9] = static_cast<uint8_t>(low * 7);
    return Endpoint::v6(x, 1000);
  };
  RateLimiter l({.rate = 10, .burst = 3});
  CHECK(l.allow(host(1), 0));
  CHECK(l.allow(host(2), 0));
  CHECK(l.allow(host(3), 0));
  CHECK_FALSE(l.allow(host(4), 0));  // another address of the same /64: same bucket
  CHECK(l.allow(host(4, 3), 0));     // another /64: its own bucket
  CHECK(l.tracked() == 2u);

  RateLimiter per_host({.rate = 10, .burst = 1, .ipv6_prefix = 128});
  CHECK(per_host.allow(host(1), 0));
  CHECK(per_host.allow(host(2), 0));
  CHECK_FALSE(per_host.allow(host(2), 0));

  RateLimiter per_52({.rate = 10, .burst = 2, .ipv6_prefix = 52});  // not on a byte boundary
  std::array<uint8_t, 16> b = a;
  b[6] = 0x0f;  // differs in bits 52..55 only: same /52
  CHECK(per_52.allow(Endpoint::v6(a, 1), 0));
  CHECK(per_52.allow(Endpoint::v6(b, 1), 0));
  CHECK_FALSE(per_52.allow(Endpoint::v6(a, 1), 0));
  b[6] = 0x1f;  // differs in bit 51: another /52
  CHECK(per_52.allow(Endpoint::v6(b, 1), 0));
}
