// TokenSource: the authentication tokens (docs/design.md §6) udp_sim puts into LOGIN, HEARTBEAT and
// LOGOUT when run with --auth-key-file. One token per user, made on the user's first request and
// kept in a table allocated once at construction (20 bytes a user), so the hot path allocates
// nothing and computes at most one HMAC per user (with one keyed TokenMac); a token is made anew
// (valid for another hour) once it has less than kRenewBefore seconds left, so runs longer than an
// hour keep working.
//
// Not thread-safe: used on the LoadDriver's thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/security/token.h"

namespace imhash::sim {

class TokenSource {
 public:
  static constexpr uint32_t kValidity = 3600;    // seconds
  static constexpr uint32_t kRenewBefore = 600;  // seconds

  TokenSource(std::span<const uint8_t> key, uint64_t first_user, uint32_t users);

  // The token of user index `user` (id first_user + user), valid at `now` (Unix seconds).
  client::Token token_for(uint32_t user, uint32_t now);
  uint64_t macs_computed() const { return macs_computed_; }

 private:
  struct Entry {
    uint32_t expiry = 0;  // 0: none yet
    std::array<uint8_t, 16> mac{};
  };
  TokenMac mac_;  // keyed once
  const uint64_t first_user_;
  std::vector<Entry> entries_;
  uint64_t macs_computed_ = 0;
};

}  // namespace imhash::sim
