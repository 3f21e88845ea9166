#include "login_server/rate_limiter.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace imhash {

namespace {

constexpr uint64_t kMicro = 1'000'000;

constexpr int64_t kRefusalIntervalMs = 1000 / RateLimiter::kRefusalsPerSecond;

uint64_t hash_address(const std::array<uint8_t, 16>& addr, uint8_t family) {
  uint64_t a = 0, b = 0;
  std::memcpy(&a, addr.data(), 8);
  std::memcpy(&b, addr.data() + 8, 8);
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + family) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

}  // namespace

RateLimiter::RateLimiter(RateLimit limit, uint32_t capacity)
    : limit_(limit),
      burst_micro_(uint64_t{std::max(limit.burst, 1u)} * kMicro),
      fill_ns_(limit.rate == 0 ? 0
                               : static_cast<int64_t>(uint64_t{std::max(limit.burst, 1u)} *
                                                      1'000'000'000ull / limit.rate)) {
  const uint32_t n = std::bit_ceil(std::max(capacity, kWays));
  sets_ = n / kWays;
  if (enabled()) buckets_ = std::make_unique<Bucket[]>(n);
}

size_t RateLimiter::memory_bytes() const {
  return enabled() ? size_t{sets_} * kWays * sizeof(Bucket) : 0;
}

uint64_t RateLimiter::refill(const Bucket& b, int64_t now_ns) const {
  const int64_t elapsed = now_ns - b.refilled_ns;
  if (elapsed <= 0) return b.micro_tokens;
  if (elapsed >= fill_ns_) return burst_micro_;
  // elapsed < burst * 1e9 / rate, so elapsed * rate < burst * 1e9 <= 2^32 * 1e9: no overflow.
  // micro-tokens gained = elapsed_ns * rate * 1e6 / 1e9.
  const uint64_t gained = static_cast<uint64_t>(elapsed) * limit_.rate / 1000;
  return std::min(burst_micro_, b.micro_tokens + gained);
}

std::array<uint8_t, 16> RateLimiter::key_of(const Endpoint& source) const {
  std::array<uint8_t, 16> key = source.addr;
  if (source.family == 6 && limit_.ipv6_prefix < 128) {
    const unsigned bits = limit_.ipv6_prefix;
    for (unsigned i = bits / 8; i < key.size(); ++i) key[i] = 0;
    if (bits % 8 != 0)
      key[bits / 8] = source.addr[bits / 8] & static_cast<uint8_t>(0xff00 >> (bits % 8));
  }
  return key;
}

RateLimiter::Verdict RateLimiter::admit(const Endpoint& source, int64_t now_ns) {
  if (!enabled()) return Verdict::kAllow;
  const std::array<uint8_t, 16> key = key_of(source);
  Bucket* set = &buckets_[(hash_address(key, source.family) & (sets_ - 1)) * kWays];
  Bucket* found = nullptr;
  Bucket* victim = nullptr;
  for (uint32_t w = 0; w < kWays; ++w) {
    Bucket& b = set[w];
    if (b.used && b.family == source.family && b.addr == key) {
      found = &b;
      break;
    }
    // A free way if there is one, else the one refilled least recently.
    if (!b.used) {
      if (!victim || victim->used) victim = &b;
    } else if (!victim || (victim->used && b.seen_ns < victim->seen_ns)) {
      victim = &b;
    }
  }
  if (!found) {
    if (victim->used) {
      ++evictions_;
    } else {
      ++tracked_;
    }
    found = victim;
    found->used = true;
    found->family = source.family;
    found->addr = key;
    found->refused_ms = 0;
    found->micro_tokens = burst_micro_;
    found->refilled_ns = now_ns;
    found->seen_ns = now_ns;
  } else {
    const uint64_t tokens = refill(*found, now_ns);
    // Keep the clock where it was while less than a micro-token accrued, so that frequent calls
    // at a low rate do not lose their fractions.
    if (tokens != found->micro_tokens || tokens == burst_micro_) {
      found->refilled_ns = std::max(found->refilled_ns, now_ns);
    }
    found->micro_tokens = tokens;
  }
  found->seen_ns = std::max(found->seen_ns, now_ns);
  if (found->micro_tokens >= kMicro) {
    found->micro_tokens -= kMicro;
    return Verdict::kAllow;
  }
  // 0 marks "never refused", so a refusal at a time whose ms value is 0 is stored as 1.
  uint32_t now_ms = static_cast<uint32_t>(now_ns / 1'000'000);
  if (now_ms == 0) now_ms = 1;
  if (found->refused_ms != 0 &&
      static_cast<int32_t>(now_ms - found->refused_ms) < kRefusalIntervalMs) {
    return Verdict::kDrop;
  }
  found->refused_ms = now_ms;
  return Verdict::kRefuse;
}

}  // namespace imhash
