// Mutual authentication of internal TCP links (docs/security.md §5): every node of a cluster holds
// the same cluster key, and each side of a link proves it holds the key by sending an
// HMAC-SHA256 over a transcript of the handshake: fresh nonces from both sides, the kind of link,
// the connecting peer's role and name and the listener's name. A proof made for one connection,
// one direction or one identity is worthless on any other, so a recorded handshake cannot be
// replayed and a proof cannot be relayed under another name. Pure (libcrypto only, no I/O); any
// thread may call these functions concurrently.
//
// The handshake (carried by HELLO/AUTH frames on the hash port, hello/challenge/proof messages on
// the config link; docs/protocol.md):
//   client -> server  role, name, client nonce
//   server -> client  server nonce, proof(kServer)     the client checks it: the server has the key
//   client -> server  proof(kClient)                   the server checks it: the client has the key
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace imhash::link_auth {

inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kProofSize = 32;  // a whole HMAC-SHA256
using Nonce = std::array<uint8_t, kNonceSize>;
using Proof = std::array<uint8_t, kProofSize>;

// Who is proving: the listener answering a handshake, or the peer that dialled it.
enum class Side : uint8_t { kServer = 1, kClient = 2 };

// Everything a proof binds. The strings are at most 255 bytes (longer ones are cut, which the
// handshakes never need: names are limited to frame::kMaxNameLength).
struct Transcript {
  std::string_view link{};  // "hash" (login/peer -> hash server) or "config" (node -> config)
  std::string_view client_role{};  // "login", "hash"
  std::string_view client_name{};  // the dialling node's name
  std::string_view server_name{};  // the listener's name ("config" for the config server)
  Nonce client_nonce{};
  Nonce server_nonce{};
};

// A fresh nonce from OpenSSL's CSPRNG; nullopt if it failed (then no handshake may proceed).
std::optional<Nonce> make_nonce();

// HMAC-SHA256(key, "imhash-link-v1" ‖ side ‖ each string with a length byte ‖ both nonces);
// nullopt if OpenSSL failed, which every check treats as a mismatch.
std::optional<Proof> prove(std::span<const uint8_t> key, Side side, const Transcript& t);

// Whether `proof` is the one `side` must send for `t` under `key`, compared in constant time.
// Fails closed: a proof of the wrong size, or one that cannot be computed, never matches.
bool verify(std::span<const uint8_t> key, Side side, const Transcript& t,
            std::span<const uint8_t> proof);

// Parses what to_hex (common/security/token.h) wrote, for the JSON config link: nullopt unless
// exactly 2 * N hex digits.
template <size_t N>
std::optional<std::array<uint8_t, N>> from_hex(std::string_view text);

}  // namespace imhash::link_auth
