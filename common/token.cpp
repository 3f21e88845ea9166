#include "common/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include "common/bytes.h"

namespace imhash {

namespace {

std::array<uint8_t, 12> token_message(uint64_t user_id, uint32_t expiry) {
  std::array<uint8_t, 12> m{};
  bytes::put_u64(m.data(), user_id);
  bytes::put_u32(m.data() + 8, expiry);
  return m;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

const char* to_string(TokenCheck c) {
  switch (c) {
    case TokenCheck::kOk:
      return "ok";
    case TokenCheck::kMissing:
      return "missing";
    case TokenCheck::kWrongUser:
      return "wrong_user";
    case TokenCheck::kExpired:
      return "expired";
    case TokenCheck::kBadMac:
      return "bad_mac";
  }
  return "unknown";
}

std::array<uint8_t, 16> token_mac(std::span<const uint8_t> key, uint64_t user_id, uint32_t expiry) {
  const auto msg = token_message(user_id, expiry);
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  std::array<uint8_t, 16> mac{};
  // HMAC() fails only on an unusable digest or a null key pointer with a non-zero length.
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), full,
           &len) != nullptr &&
      len >= mac.size()) {
    std::memcpy(mac.data(), full, mac.size());
  }
  return mac;
}

client::Token make_token(std::span<const uint8_t> key, uint64_t user_id, uint32_t expiry) {
  client::Token t;
  t.user_id = user_id;
  t.expiry = expiry;
  t.mac = token_mac(key, user_id, expiry);
  return t;
}

TokenCheck verify_token(std::span<const uint8_t> key, const client::Token& token,
                        uint64_t header_user_id, uint32_t now) {
  if (token.user_id != header_user_id) return TokenCheck::kWrongUser;
  if (token.expiry <= now) return TokenCheck::kExpired;
  const auto want = token_mac(key, token.user_id, token.expiry);
  if (CRYPTO_memcmp(want.data(), token.mac.data(), want.size()) != 0) return TokenCheck::kBadMac;
  return TokenCheck::kOk;
}

TokenCheck verify_token(std::span<const uint8_t> key, const std::optional<client::Token>& token,
                        uint64_t header_user_id, uint32_t now) {
  if (!token) return TokenCheck::kMissing;
  return verify_token(key, *token, header_user_id, now);
}

std::array<uint8_t, client::kTokenLen> token_bytes(const client::Token& token) {
  std::array<uint8_t, client::kTokenLen> b{};
  const auto msg = token_message(token.user_id, token.expiry);
  std::memcpy(b.data(), msg.data(), msg.size());
  std::memcpy(b.data() + msg.size(), token.mac.data(), token.mac.size());
  return b;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

std::optional<std::vector<uint8_t>> parse_hex_key(std::string_view text, std::string& error) {
  std::vector<uint8_t> key;
  int high = -1;
  size_t digits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') continue;
    const int v = hex_value(c);
    if (v < 0) {
      error = "the key must be written in hex (0-9, a-f); found another character at offset " +
              std::to_string(i);
      return std::nullopt;
    }
    ++digits;
    if (high < 0) {
      high = v;
    } else {
      key.push_back(static_cast<uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  if (high >= 0) {
    error = "the key has an odd number of hex digits (" + std::to_string(digits) + ")";
    return std::nullopt;
  }
  if (key.size() < kMinAuthKeyBytes) {
    error = "the key is too short: " + std::to_string(digits) + " hex digits, at least " +
            std::to_string(2 * kMinAuthKeyBytes) + " needed (" + std::to_string(kMinAuthKeyBytes) +
            " bytes)";
    return std::nullopt;
  }
  if (key.size() > kMaxAuthKeyBytes) {
    error = "the key is too long: at most " + std::to_string(2 * kMaxAuthKeyBytes) + " hex digits";
    return std::nullopt;
  }
  return key;
}

}  // namespace imhash
