#include "config_server/node_auth.h"

#include "common/security/token.h"

namespace imhash {

NodeAuth::Verdict NodeAuth::on_message(const control::Message& m,
                                       std::optional<control::Message>& reply, std::string& why) {
  reply.reset();
  const auto* hello = std::get_if<control::AuthHello>(&m);
  if (key_.empty()) {
    if (!hello) return Verdict::kPass;
    why =
        "this config server has no cluster key, so it cannot prove one: give it the same "
        "--cluster-key-file as the node (or start the node without one)";
    return Verdict::kRefuse;
  }
  // What both proofs bind (role_ and name_ are the ones the auth_hello gave).
  auto transcript = [&] {
    return link_auth::Transcript{.link = "config",
                                 .client_role = to_string(role_),
                                 .client_name = name_,
                                 .server_name = "config",
                                 .client_nonce = client_nonce_,
                                 .server_nonce = server_nonce_};
  };
  switch (stage_) {
    case Stage::kHello: {
      if (!hello) {
        why = std::string("a ") + control::type_name(m) +
              " before proving the cluster key: this config server requires one (is "
              "--cluster-key-file set on the node?)";
        return Verdict::kRefuse;
      }
      const auto nonce = link_auth::from_hex<link_auth::kNonceSize>(hello->nonce);
      const auto mine = link_auth::make_nonce();
      if (!nonce || !mine) {
        why = nonce ? "the config server could not make a nonce" : "malformed auth_hello nonce";
        return Verdict::kRefuse;
      }
      role_ = hello->role;
      name_ = hello->name;
      client_nonce_ = *nonce;
      server_nonce_ = *mine;
      const auto proof = link_auth::prove(key_, link_auth::Side::kServer, transcript());
      if (!proof) {
        why = "the config server could not compute its proof";
        return Verdict::kRefuse;
      }
      reply = control::AuthChallenge{to_hex(server_nonce_), to_hex(*proof)};
      stage_ = Stage::kProof;
      return Verdict::kReply;
    }
    case Stage::kProof: {
      const auto* p = std::get_if<control::AuthProof>(&m);
      const auto proof = p ? link_auth::from_hex<link_auth::kProofSize>(p->proof) : std::nullopt;
      if (!proof || !link_auth::verify(key_, link_auth::Side::kClient, transcript(), *proof)) {
        why = p ? "wrong proof of the cluster key (a different key?)"
                : std::string("a ") + control::type_name(m) + " instead of auth_proof";
        return Verdict::kRefuse;
      }
      stage_ = Stage::kDone;
      return Verdict::kReply;
    }
    case Stage::kDone:
      if (hello || std::holds_alternative<control::AuthProof>(m)) {
        why = "a second handshake on one link";
        return Verdict::kRefuse;
      }
      if (const auto* r = std::get_if<control::Register>(&m);
          r && (r->role != role_ || r->name != name_)) {
        why = "registers as " + std::string(to_string(r->role)) + " " + r->name +
              " after proving the key as " + to_string(role_) + " " + name_;
        return Verdict::kRefuse;
      }
      return Verdict::kPass;
  }
  return Verdict::kRefuse;
}

}  // namespace imhash
