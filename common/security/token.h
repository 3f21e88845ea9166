// Authentication tokens (docs/design.md §6): TOKEN = user_id (8) ‖ expiry (4, Unix seconds) ‖ the
// first 16 bytes of HMAC-SHA256(key, user_id ‖ expiry), all big-endian. Issued by the IM system's
// auth service (and `imctl token` for tests), checked by login servers started with
// --auth-key-file. Pure: no I/O, no clock (callers pass `now`), no exceptions; the MAC is compared
// in constant time (CRYPTO_memcmp). Any thread may call the free functions concurrently; a TokenMac
// belongs to one thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/codec/client_protocol.h"

namespace imhash {

inline constexpr size_t kMinAuthKeyBytes = 16;
inline constexpr size_t kMaxAuthKeyBytes = 256;

enum class TokenCheck : uint8_t {
  kOk,
  kMissing,    // no TOKEN TLV
  kWrongUser,  // the token's user_id is not the header's
  kExpired,    // expiry <= now
  kBadMac,     // forged or issued under another key
};
const char* to_string(TokenCheck c);

// HMAC-SHA256 under one key, set up once: each MAC only re-initialises the keyed context, where a
// one-shot HMAC() fetches the digest (under OpenSSL's provider lock) and schedules the key again.
// A login worker keeps one for its data path. Not thread-safe: one per thread.
class TokenMac {
 public:
  // Throws std::runtime_error if OpenSSL has no HMAC-SHA256.
  explicit TokenMac(std::span<const uint8_t> key);
  ~TokenMac();
  TokenMac(const TokenMac&) = delete;
  TokenMac& operator=(const TokenMac&) = delete;

  // The 16-byte MAC of (user_id, expiry); nullopt if OpenSSL failed (an allocation inside it),
  // which every check treats as a mismatch: a failure never yields a MAC that some token could
  // match.
  std::optional<std::array<uint8_t, 16>> operator()(uint64_t user_id, uint32_t expiry);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The 16-byte MAC of (user_id, expiry) under `key` (a TokenMac made for the call). Throws
// std::runtime_error if OpenSSL fails (tools and tests; the data path uses a TokenMac).
std::array<uint8_t, 16> token_mac(std::span<const uint8_t> key, uint64_t user_id, uint32_t expiry);

client::Token make_token(std::span<const uint8_t> key, uint64_t user_id, uint32_t expiry);

// A token is valid while now < expiry. Checks in this order: missing, user, expiry, MAC.
TokenCheck verify_token(std::span<const uint8_t> key, const client::Token& token,
                        uint64_t header_user_id, uint32_t now);
TokenCheck verify_token(std::span<const uint8_t> key, const std::optional<client::Token>& token,
                        uint64_t header_user_id, uint32_t now);
TokenCheck verify_token(TokenMac& mac, const std::optional<client::Token>& token,
                        uint64_t header_user_id, uint32_t now);

// Compares the MAC a token should carry (`want`, nullopt when it could not be computed) with the
// one it carries, in constant time. Fails closed: no `want`, no match.
bool token_mac_matches(const std::optional<std::array<uint8_t, 16>>& want,
                       const client::Token& token);

// The 28 TOKEN bytes, as they travel in the TLV.
std::array<uint8_t, client::kTokenLen> token_bytes(const client::Token& token);
// Lower-case hex of `bytes`.
std::string to_hex(std::span<const uint8_t> bytes);
// The value of one hex digit (either case), or -1.
int hex_digit(char c);

// Parses a key written as hex: at least 2 * kMinAuthKeyBytes hex digits (at most
// 2 * kMaxAuthKeyBytes), an even count; whitespace anywhere is ignored. On bad input returns
// nullopt and sets `error` to a sentence saying what is wrong.
std::optional<std::vector<uint8_t>> parse_hex_key(std::string_view text, std::string& error);

}  // namespace imhash
