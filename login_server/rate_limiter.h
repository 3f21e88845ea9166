// RateLimiter: a token bucket per source IP address (docs/design.md §6), for one login server
// worker. Buckets are keyed by address only, not port: many users share a carrier-grade NAT
// address, hence the generous default rate (login_server --rate-limit). IPv6 sources are keyed by
// their prefix (default /64, --rate-limit-ipv6-prefix): one host usually holds a whole /64, so
// keying per /128 would let it walk around the limit.
//
// Refusals are limited too: a source over its limit is answered RATE_LIMITED at most
// kRefusalsPerSecond times a second and dropped silently otherwise, so a spoofed victim address
// receives at most rate + kRefusalsPerSecond replies a second from each worker, whatever is sent
// in its name. Each worker thread has its own
// limiter and nothing is shared, so the effective limit for a source is per thread: a source whose
// datagrams the kernel spreads over T workers (SO_REUSEPORT hashes the 4-tuple, so several source
// ports of one address may land on different threads) gets up to T times the configured rate.
//
// Memory is bounded and allocated once: a set-associative table of `capacity` buckets (kWays per
// set; 48 bytes a bucket, so about 3 MB per worker at the default 65536). A new source takes a free
// way of its set, or evicts the way seen (and so refilled) least recently; an evicted source starts
// again with a full bucket. No allocation per datagram.
//
// Not thread-safe: all methods run on the owning worker's thread. Pure: time comes in as `now_ns`
// (any monotonic clock).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/codec/endpoint.h"

namespace imhash {

struct RateLimit {
  uint32_t rate = 20000;     // requests per second per source address; 0: no limit
  uint32_t burst = 40000;    // bucket size: requests a quiet source may send at once
  uint8_t ipv6_prefix = 64;  // IPv6 sources sharing their first ipv6_prefix bits share a bucket
};

class RateLimiter {
 public:
  static constexpr uint32_t kWays = 8;
  static constexpr uint32_t kDefaultCapacity = 65536;
  static constexpr uint32_t kRefusalsPerSecond = 10;

  enum class Verdict : uint8_t {
    kAllow,   // within the limit: serve it
    kRefuse,  // over the limit: answer RATE_LIMITED
    kDrop,    // over the limit, and refused recently: no answer at all
  };

  // `capacity` is rounded up to a power of two, at least kWays.
  explicit RateLimiter(RateLimit limit, uint32_t capacity = kDefaultCapacity);

  // Takes one token from `source`'s bucket (the port is ignored) and says what to do.
  Verdict admit(const Endpoint& source, int64_t now_ns);
  // admit() == kAllow.
  bool allow(const Endpoint& source, int64_t now_ns) {
    return admit(source, now_ns) == Verdict::kAllow;
  }

  bool enabled() const { return limit_.rate != 0; }
  uint32_t capacity() const { return sets_ * kWays; }
  // Sources currently tracked (at most capacity()).
  uint32_t tracked() const { return tracked_; }
  uint64_t evictions() const { return evictions_; }
  // Bytes held by the table: fixed at construction.
  size_t memory_bytes() const;

 private:
  struct Bucket {
    std::array<uint8_t, 16> addr{};
    uint8_t family = 0;
    bool used = false;
    uint32_t refused_ms = 0;    // when RATE_LIMITED was last answered (ms, wrapping), 0: never
    int64_t refilled_ns = 0;    // the time the tokens were last brought up to date
    int64_t seen_ns = 0;        // last request: eviction takes the least recently seen
    uint64_t micro_tokens = 0;  // tokens * 1e6
  };

  uint64_t refill(const Bucket& b, int64_t now_ns) const;
  // The bytes that key `source`'s bucket (an IPv6 address cut to the prefix).
  std::array<uint8_t, 16> key_of(const Endpoint& source) const;

  const RateLimit limit_;
  const uint64_t burst_micro_;
  const int64_t fill_ns_;  // time to fill an empty bucket
  uint32_t sets_ = 0;
  std::unique_ptr<Bucket[]> buckets_;
  uint32_t tracked_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace imhash
