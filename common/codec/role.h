// Role: what a node is, a hash server or a login server. One enum for the two protocols that
// carry it: the hash port's HELLO with kFlagAuth as a byte (common/codec/frame_protocol.h) and the
// config link's register and auth_hello as a word (common/routing/control_protocol.h); both
// handshakes' proofs bind the word (common/security/link_auth.h). Pure; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace imhash {

// The values are the HELLO byte on the hash port's wire: they must not change.
enum class Role : uint8_t { kLogin = 1, kHash = 2 };

inline constexpr std::array kRoles{Role::kHash, Role::kLogin};

// "hash", "login": the config link's word, and the name in logs, labels and proofs.
const char* to_string(Role r);
std::optional<Role> parse_role(std::string_view text);

}  // namespace imhash
