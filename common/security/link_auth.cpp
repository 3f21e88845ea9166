#include "common/security/link_auth.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>

#include "common/security/token.h"

namespace imhash::link_auth {

namespace {

constexpr std::string_view kLabel = "imhash-link-v1";

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  const size_t n = std::min<size_t>(s.size(), 255);
  out.push_back(static_cast<uint8_t>(n));
  out.insert(out.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace

std::optional<Nonce> make_nonce() {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) return std::nullopt;
  return n;
}

std::optional<Proof> prove(std::span<const uint8_t> key, Side side, const Transcript& t) {
  if (key.empty()) return std::nullopt;  // no key, no proof: never an HMAC under an empty key
  std::vector<uint8_t> msg(kLabel.begin(), kLabel.end());
  msg.push_back(static_cast<uint8_t>(side));
  put_string(msg, t.link);
  put_string(msg, t.client_role);
  put_string(msg, t.client_name);
  put_string(msg, t.server_name);
  msg.insert(msg.end(), t.client_nonce.begin(), t.client_nonce.end());
  msg.insert(msg.end(), t.server_nonce.begin(), t.server_nonce.end());
  Proof p;
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), p.data(),
           &len) == nullptr ||
      len != p.size()) {
    return std::nullopt;
  }
  return p;
}

bool verify(std::span<const uint8_t> key, Side side, const Transcript& t,
            std::span<const uint8_t> proof) {
  if (proof.size() != kProofSize) return false;
  const auto want = prove(key, side, t);
  return want && CRYPTO_memcmp(want->data(), proof.data(), kProofSize) == 0;
}

template <size_t N>
std::optional<std::array<uint8_t, N>> from_hex(std::string_view text) {
  if (text.size() != 2 * N) return std::nullopt;
  std::array<uint8_t, N> out{};
  for (size_t i = 0; i < N; ++i) {
    const int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

template std::optional<Nonce> from_hex<kNonceSize>(std::string_view);
template std::optional<Proof> from_hex<kProofSize>(std::string_view);

}  // namespace imhash::link_auth
