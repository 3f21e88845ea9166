#include "login_server/request_plan.h"

#include <algorithm>

#include "common/codec/bytes.h"

namespace imhash {

using client::Op;
using client::Status;

const char* to_string(DropReason r) {
  switch (r) {
    case DropReason::kTooShort:
      return "too_short";
    case DropReason::kBadMagic:
      return "bad_magic";
    case DropReason::kRateLimited:
      return "rate_limited";
    case DropReason::kCount:
      break;
  }
  return "?";
}

namespace {

client::Header header_of(const ClientAsk& ask) {
  client::Header h;
  h.version = client::kVersion;
  h.op_byte = static_cast<uint8_t>(ask.op);
  h.request_id = ask.request_id;
  h.user_id = ask.user_id;
  return h;
}

Plan reply_plan(Status status, size_t size) {
  Plan p;
  p.kind = Plan::kReply;
  p.status = status;
  p.reply_size = size;
  return p;
}

}  // namespace

Plan plan_rate_limited(std::span<const uint8_t> datagram, std::span<uint8_t> reply) {
  Plan p;
  if (datagram.size() < client::kMinDatagram) return p;  // kTooShort
  if (datagram[0] != client::kMagic[0] || datagram[1] != client::kMagic[1]) {
    p.drop = DropReason::kBadMagic;
    return p;
  }
  client::Header h;
  h.version = datagram[2];
  h.op_byte = datagram[3];
  h.request_id = bytes::get_u32(datagram.data() + 4);
  h.user_id = bytes::get_u64(datagram.data() + 8);
  return reply_plan(Status::kRateLimited,
                    client::encode_error_reply(h, Status::kRateLimited, reply));
}

Plan plan_request(std::span<const uint8_t> datagram, const Endpoint& source, uint64_t table_version,
                  std::span<uint8_t> reply, const AuthPolicy* auth) {
  const client::Decoded d = client::decode_request(datagram);
  if (d.error != client::DecodeError::kOk) {
    const auto status = client::error_reply_status(d.error);
    if (!status || !d.header_valid) {
      Plan p;
      p.drop =
          d.error == client::DecodeError::kBadMagic ? DropReason::kBadMagic : DropReason::kTooShort;
      return p;
    }
    return reply_plan(*status, client::encode_error_reply(d.header, *status, reply));
  }

  const client::Message& m = d.msg;
  if (auth && (m.op == Op::kLogin || m.op == Op::kHeartbeat || m.op == Op::kLogout)) {
    const TokenCheck check = verify_token(*auth->mac, m.token, m.user_id, auth->now);
    if (check != TokenCheck::kOk) {
      Plan p = reply_plan(Status::kUnauthorized,
                          client::encode_error_reply(d.header, Status::kUnauthorized, reply));
      p.auth = check;
      return p;
    }
  }
  Plan p;
  p.ask.op = m.op;
  p.ask.request_id = m.request_id;
  p.ask.user_id = m.user_id;
  p.ask.request_size = static_cast<uint16_t>(std::min<size_t>(datagram.size(), 0xffff));
  switch (m.op) {
    case Op::kPing: {
      client::Message r;
      r.op = Op::kPing;
      r.response = true;
      r.request_id = m.request_id;
      r.table_version = table_version;
      return reply_plan(Status::kOk, client::encode_response(r, reply.first(datagram.size())));
    }
    case Op::kLogin:
    case Op::kHeartbeat:
      p.ask.endpoint = (m.endpoint ? *m.endpoint : source).unmapped();
      // Stored and handed out to whoever looks the user up: only a reachable unicast endpoint.
      if (unreachable_endpoint_reason(p.ask.endpoint) != nullptr) {
        return reply_plan(Status::kBadRequest,
                          client::encode_error_reply(d.header, Status::kBadRequest, reply));
      }
      p.frame_type = frame::FrameType::kUpsert;
      break;
    case Op::kLookup:
      p.frame_type = frame::FrameType::kGet;
      break;
    case Op::kLogout:
      p.frame_type = frame::FrameType::kDelete;
      break;
  }
  p.kind = Plan::kForward;
  return p;
}

size_t reply_with_status(const ClientAsk& ask, Status status, std::span<uint8_t> reply) {
  return client::encode_error_reply(header_of(ask), status, reply);
}

size_t reply_from_response(const ClientAsk& ask, const frame::Response& response,
                           std::span<uint8_t> reply, Status& status) {
  using frame::FrameStatus;
  status = Status::kOk;
  client::Message r;
  r.op = ask.op;
  r.response = true;
  r.request_id = ask.request_id;
  r.user_id = ask.user_id;
  switch (response.status) {
    case FrameStatus::kOk:
      if (ask.op == Op::kLogin || ask.op == Op::kHeartbeat) {
        r.endpoint = ask.endpoint;
      } else if (ask.op == Op::kLookup) {
        r.endpoint = response.endpoint;
        r.age = response.age_seconds;
      }
      break;
    case FrameStatus::kNotFound:
      // LOGOUT is idempotent: a retried LOGOUT whose first try already deleted the record is OK.
      status = ask.op == Op::kLogout ? Status::kOk : Status::kNotFound;
      break;
    default:
      // MOVED is handled before this (retry with a newer table); anything else means the hash tier
      // could not serve the request.
      status = Status::kUnavailable;
      break;
  }
  r.status = status;
  if (status != Status::kOk) r.endpoint.reset(), r.age.reset();
  const size_t n =
      client::encode_response(r, reply.first(std::min<size_t>(reply.size(), ask.request_size)));
  if (n != 0) return n;
  // Cannot happen for version-1 answers (all fit in the 48-byte minimum request); never amplify.
  status = Status::kUnavailable;
  return reply_with_status(ask, status, reply);
}

}  // namespace imhash
