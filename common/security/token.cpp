#include "common/security/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstring>
#include <stdexcept>

#include "common/codec/bytes.h"

namespace imhash {

namespace {

std::array<uint8_t, 12> token_message(uint64_t user_id, uint32_t expiry) {
  std::array<uint8_t, 12> m{};
  bytes::put_u64(m.data(), user_id);
  bytes::put_u32(m.data() + 8, expiry);
  return m;
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

struct TokenMac::Impl {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* ctx = nullptr;
  ~Impl() {
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
  }
};

TokenMac::TokenMac(std::span<const uint8_t> key) : impl_(std::make_unique<Impl>()) {
  static const uint8_t kNoKey = 0;  // a null key pointer would mean "keep the current key"
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                               OSSL_PARAM_construct_end()};
  impl_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (impl_->mac != nullptr) impl_->ctx = EVP_MAC_CTX_new(impl_->mac);
  if (impl_->ctx == nullptr ||
      EVP_MAC_init(impl_->ctx, key.empty() ? &kNoKey : key.data(), key.size(), params) != 1) {
    throw std::runtime_error("OpenSSL has no usable HMAC-SHA256");
  }
}

TokenMac::~TokenMac() = default;

std::optional<std::array<uint8_t, 16>> TokenMac::operator()(uint64_t user_id, uint32_t expiry) {
  const auto msg = token_message(user_id, expiry);
  uint8_t full[EVP_MAX_MD_SIZE];
  size_t len = 0;
  // A null key re-initialises with the key set at construction. These fail only on allocation
  // failure inside OpenSSL.
  if (EVP_MAC_init(impl_->ctx, nullptr, 0, nullptr) != 1 ||
      EVP_MAC_update(impl_->ctx, msg.data(), msg.size()) != 1 ||
      EVP_MAC_final(impl_->ctx, full, &len, sizeof full) != 1 || len < 16) {
    return std::nullopt;
  }
  std::array<uint8_t, 16> mac;
  std::memcpy(mac.data(), full, mac.size());
  return mac;
}

std::array<uint8_t, 16> token_mac(std::span<const uint8_t> key, uint64_t user_id, uint32_t expiry) {
  const auto mac = TokenMac(key)(user_id, expiry);
  if (!mac) throw std::runtime_error("OpenSSL failed to compute an HMAC-SHA256");
  return *mac;
}

bool token_mac_matches(const std::optional<std::array<uint8_t, 16>>& want,
                       const client::Token& token) {
  return want && CRYPTO_memcmp(want->data(), token.mac.data(), want->size()) == 0;
}

client::Token make_token(std::span<const uint8_t> key, uint64_t user_id, uint32_t expiry) {
  client::Token t;
  t.user_id = user_id;
  t.expiry = expiry;
  t.mac = token_mac(key, user_id, expiry);
  return t;
}

namespace {

template <typename MacOf>
TokenCheck check_token(MacOf&& mac_of, const client::Token& token, uint64_t header_user_id,
                       uint32_t now) {
  if (token.user_id != header_user_id) return TokenCheck::kWrongUser;
  if (token.expiry <= now) return TokenCheck::kExpired;
  if (!token_mac_matches(mac_of(token.user_id, token.expiry), token)) return TokenCheck::kBadMac;
  return TokenCheck::kOk;
}

}  // namespace

TokenCheck verify_token(std::span<const uint8_t> key, const client::Token& token,
                        uint64_t header_user_id, uint32_t now) {
  TokenMac mac(key);
  return check_token(mac, token, header_user_id, now);
}

TokenCheck verify_token(TokenMac& mac, const std::optional<client::Token>& token,
                        uint64_t header_user_id, uint32_t now) {
  if (!token) return TokenCheck::kMissing;
  return check_token(mac, *token, header_user_id, now);
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

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
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
    const int v = hex_digit(c);
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
