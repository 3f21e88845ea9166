// NodeAuth: the config server's side of the cluster-key handshake on one node link
// (common/security/link_auth.h, messages in common/routing/control_protocol.h). With a key, a node
// must send auth_hello, get our auth_challenge (our proof), and send auth_proof before anything
// else is taken from it; its register must then name the role and name it proved. Without a key, a
// node that asks for the handshake is refused (it would refuse us anyway: we cannot prove a key).
//
// Thread rules: owned by one NodeSession, on the config server's main thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/routing/control_protocol.h"
#include "common/security/link_auth.h"

namespace imhash {

class NodeAuth {
 public:
  explicit NodeAuth(std::span<const uint8_t> key) : key_(key.begin(), key.end()) {}

  enum class Verdict {
    kPass,    // not part of the handshake: hand the message to the service
    kReply,   // handshake message taken; send `reply` (if set) and read on
    kRefuse,  // send Refused{why} and close: the node did not prove the key
  };
  // Judges one message from the node; `reply` and `why` are set as the verdict says.
  Verdict on_message(const control::Message& m, std::optional<control::Message>& reply,
                     std::string& why);

 private:
  enum class Stage { kHello, kProof, kDone };
  std::vector<uint8_t> key_;
  Stage stage_ = Stage::kHello;
  Role role_ = Role::kHash;
  std::string name_;
  link_auth::Nonce client_nonce_{};
  link_auth::Nonce server_nonce_{};
};

}  // namespace imhash
