// Turning a client datagram into what the login server must do with it, and a hash server's answer
// into the client's reply (docs/design.md §1). Pure: no sockets, no clock; any thread. The worker
// (login_server/worker.h) supplies the datagram, its source and the current table version.
#pragma once

#include <cstdint>
#include <span>

#include "common/codec/client_protocol.h"
#include "common/codec/frame_protocol.h"
#include "common/security/token.h"

namespace imhash {

// Why a datagram got no reply at all; each is counted.
// kRateLimited: over the source's limit and already refused recently (RateLimiter::Verdict::kDrop).
enum class DropReason : uint8_t { kTooShort, kBadMagic, kRateLimited, kCount };
const char* to_string(DropReason r);

// What the client asked for, kept while its request is in flight to a hash server.
struct ClientAsk {
  client::Op op = client::Op::kPing;
  uint32_t request_id = 0;
  uint64_t user_id = 0;
  uint16_t request_size = 0;  // bytes of the request datagram: the reply must not exceed it
  Endpoint endpoint{};        // LOGIN/HEARTBEAT: what is stored (the TLV, or the source address)
};

struct Plan {
  enum Kind : uint8_t {
    kDrop,     // no reply (see drop)
    kReply,    // reply_size bytes are ready in the caller's reply buffer
    kForward,  // send `frame_type` for `ask` to the owner of ask.user_id
  };
  Kind kind = kDrop;
  DropReason drop = DropReason::kTooShort;
  client::Status status = client::Status::kOk;  // kReply: the status replied (for counting)
  size_t reply_size = 0;
  frame::FrameType frame_type = frame::FrameType::kPing;
  ClientAsk ask{};
  TokenCheck auth = TokenCheck::kOk;  // with auth on: why a request was answered UNAUTHORIZED
};

// Authentication (docs/design.md §6), when the login server has a key: LOGIN, HEARTBEAT and LOGOUT
// need a valid TOKEN for the header's user_id, unexpired at `now` (Unix seconds); LOOKUP and PING
// need none. The keyed MAC (one per worker thread) is owned elsewhere and outlives the policy.
struct AuthPolicy {
  TokenMac* mac = nullptr;
  uint32_t now = 0;
};

// Decodes `datagram` and decides. `source` is the datagram's sender as seen by the server; it is
// stored for LOGIN/HEARTBEAT without an ENDPOINT TLV (an IPv4-mapped source is stored as IPv4).
// Replies (errors, PING) are encoded into `reply` (at least client::kMinDatagram bytes).
// `auth` is null when authentication is off; otherwise a request that fails it is answered
// UNAUTHORIZED (header only) and not forwarded.
Plan plan_request(std::span<const uint8_t> datagram, const Endpoint& source, uint64_t table_version,
                  std::span<uint8_t> reply, const AuthPolicy* auth = nullptr);

// A datagram from a source over its rate limit: RATE_LIMITED, header only (20 bytes, never more
// than the request), when it is at least 48 bytes with the right magic; otherwise dropped like any
// such datagram. Nothing is decoded beyond the header.
Plan plan_rate_limited(std::span<const uint8_t> datagram, std::span<uint8_t> reply);

// Encodes the client's reply to a hash server's response. Returns its size (never more than
// ask.request_size) and sets `status` to the status replied.
size_t reply_from_response(const ClientAsk& ask, const frame::Response& response,
                           std::span<uint8_t> reply, client::Status& status);

// Encodes a header-only reply with `status` (UNAVAILABLE, TIMEOUT, ...) for a request in flight.
size_t reply_with_status(const ClientAsk& ask, client::Status status, std::span<uint8_t> reply);

}  // namespace imhash
