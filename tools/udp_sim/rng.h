// Rng: a small, fast pseudo-random generator (xoshiro256**, seeded through splitmix64), so a run
// is reproducible from its --seed. A plain value: each thread uses its own.
#pragma once

#include <cstdint>

namespace imhash::sim {

// splitmix64's finaliser: a good 64-bit mixing function on its own.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) {
      seed = mix64(seed);
      w = seed;
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32).
  uint64_t below(uint64_t n) {
    __extension__ using u128 = unsigned __int128;  // __extension__: -Wpedantic accepts it
    return static_cast<uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace imhash::sim
