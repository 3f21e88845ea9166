#include "common/codec/client_protocol.h"

#include <algorithm>

#include "common/codec/bytes.h"

namespace imhash::client {

namespace {

using bytes::get_u16;
using bytes::get_u32;
using bytes::get_u64;
using bytes::Writer;

// Largest PAD TLV: 2 header bytes + 255 value bytes.
constexpr size_t kMaxPadTlv = kTlvHeaderSize + 255;

Header read_header(const uint8_t* p) {
  Header h;
  h.version = p[2];
  h.op_byte = p[3];
  h.request_id = get_u32(p + 4);
  h.user_id = get_u64(p + 8);
  h.status = p[16];
  h.flags = p[17];
  h.body_len = get_u16(p + 18);
  return h;
}

Writer write_header(Writer w, const Header& h) {
  w.u8(kMagic[0]);
  w.u8(kMagic[1]);
  w.u8(h.version);
  w.u8(h.op_byte);
  w.u32(h.request_id);
  w.u64(h.user_id);
  w.u8(h.status);
  w.u8(h.flags);
  w.u16(h.body_len);
  return w;
}

// Parses one known TLV's value into m. Returns kOk, or kBadTlv for a wrong length, family or a
// duplicate.
DecodeError read_tlv(uint8_t type, std::span<const uint8_t> v, Message& m) {
  switch (static_cast<TlvType>(type)) {
    case TlvType::kPad:
      return DecodeError::kOk;
    case TlvType::kEndpoint: {
      if (m.endpoint || v.empty()) return DecodeError::kBadTlv;
      const uint8_t family = v[0];
      const size_t want = family == 4 ? kEndpointV4Len : family == 6 ? kEndpointV6Len : 0;
      if (want == 0 || v.size() != want) return DecodeError::kBadTlv;
      Endpoint e;
      e.family = family;
      e.port = get_u16(v.data() + 1);
      std::copy(v.begin() + 3, v.end(), e.addr.begin());
      m.endpoint = e;
      return DecodeError::kOk;
    }
    case TlvType::kAge:
      if (m.age || v.size() != kAgeLen) return DecodeError::kBadTlv;
      m.age = get_u32(v.data());
      return DecodeError::kOk;
    case TlvType::kToken: {
      if (m.token || v.size() != kTokenLen) return DecodeError::kBadTlv;
      Token t;
      t.user_id = get_u64(v.data());
      t.expiry = get_u32(v.data() + 8);
      std::copy(v.begin() + 12, v.end(), t.mac.begin());
      m.token = t;
      return DecodeError::kOk;
    }
    case TlvType::kTableVersion:
      if (m.table_version || v.size() != kTableVersionLen) return DecodeError::kBadTlv;
      m.table_version = get_u64(v.data());
      return DecodeError::kOk;
  }
  return DecodeError::kOk;  // unknown type: skipped
}

DecodeError read_body(std::span<const uint8_t> body, Message& m) {
  size_t pos = 0;
  while (pos < body.size()) {
    if (body.size() - pos < kTlvHeaderSize) return DecodeError::kTlvOverrun;
    const uint8_t type = body[pos];
    const size_t len = body[pos + 1];
    pos += kTlvHeaderSize;
    if (len > body.size() - pos) return DecodeError::kTlvOverrun;
    if (DecodeError e = read_tlv(type, body.subspan(pos, len), m); e != DecodeError::kOk) return e;
    pos += len;
  }
  return DecodeError::kOk;
}

Decoded decode(std::span<const uint8_t> d, bool want_response) {
  Decoded r;
  if (d.size() < kHeaderSize) {
    r.error = DecodeError::kTooShort;
    return r;
  }
  if (d[0] != kMagic[0] || d[1] != kMagic[1]) {
    r.error = DecodeError::kBadMagic;
    return r;
  }
  r.header = read_header(d.data());
  r.header_valid = true;
  const Header& h = r.header;

  auto fail = [&r](DecodeError e) {
    r.error = e;
    return r;
  };
  if (!want_response && d.size() < kMinDatagram) return fail(DecodeError::kTooShort);
  if (h.version != kVersion) return fail(DecodeError::kBadVersion);
  if (d.size() != kHeaderSize + h.body_len) return fail(DecodeError::kLengthMismatch);
  if (h.is_response() != want_response || !is_known(h.op())) return fail(DecodeError::kBadOp);
  if (want_response) {
    if (h.flags != 0 || !is_known(static_cast<Status>(h.status))) {
      return fail(DecodeError::kBadField);
    }
  } else if (h.status != 0 || h.flags != 0 || (h.op() == Op::kPing && h.user_id != 0)) {
    return fail(DecodeError::kBadField);
  }

  Message& m = r.msg;
  m.op = h.op();
  m.response = want_response;
  m.request_id = h.request_id;
  m.user_id = h.user_id;
  m.status = static_cast<Status>(h.status);
  m.flags = h.flags;
  if (DecodeError e = read_body(d.subspan(kHeaderSize), m); e != DecodeError::kOk) {
    r.msg = Message{};
    return fail(e);
  }
  return r;
}

// Bytes of ENDPOINT, AGE, TOKEN and TABLE_VERSION TLVs, or 0 with ok = false if m cannot be
// encoded.
size_t tlv_size(const Message& m, bool& ok) {
  ok = is_known(m.op) && (!m.endpoint || m.endpoint->valid());
  if (!ok) return 0;
  size_t n = 0;
  if (m.endpoint) {
    n += kTlvHeaderSize + (m.endpoint->family == 6 ? kEndpointV6Len : kEndpointV4Len);
  }
  if (m.age) n += kTlvHeaderSize + kAgeLen;
  if (m.token) n += kTlvHeaderSize + kTokenLen;
  if (m.table_version) n += kTlvHeaderSize + kTableVersionLen;
  return n;
}

// A TLV's header: its type and the length of its value.
Writer write_tlv_header(Writer w, TlvType type, size_t value_len) {
  w.u8(static_cast<uint8_t>(type));
  w.u8(static_cast<uint8_t>(value_len));
  return w;
}

Writer write_tlvs(Writer w, const Message& m) {
  if (m.endpoint) {
    const Endpoint& e = *m.endpoint;
    const size_t addr_len = e.addr_len();
    w = write_tlv_header(w, TlvType::kEndpoint, 1 + 2 + addr_len);
    w.u8(e.family);
    w.u16(e.port);
    w.raw(e.addr.data(), addr_len);
  }
  if (m.age) {
    w = write_tlv_header(w, TlvType::kAge, kAgeLen);
    w.u32(*m.age);
  }
  if (m.token) {
    w = write_tlv_header(w, TlvType::kToken, kTokenLen);
    w.u64(m.token->user_id);
    w.u32(m.token->expiry);
    w.raw(m.token->mac.data(), m.token->mac.size());
  }
  if (m.table_version) {
    w = write_tlv_header(w, TlvType::kTableVersion, kTableVersionLen);
    w.u64(*m.table_version);
  }
  return w;
}

// Writes `n` bytes (0 or >= 2) of PAD TLVs with zero values.
Writer write_padding(Writer w, size_t n) {
  while (n > 0) {
    size_t chunk = n;
    // Never leave a 1-byte remainder, which no TLV can fill.
    if (chunk > kMaxPadTlv) chunk = (n - kMaxPadTlv == 1) ? kMaxPadTlv - 1 : kMaxPadTlv;
    w = write_tlv_header(w, TlvType::kPad, chunk - kTlvHeaderSize);
    w.fill(chunk - kTlvHeaderSize, 0);
    n -= chunk;
  }
  return w;
}

Header message_header(const Message& m, bool response, size_t body_len) {
  Header h;
  h.version = kVersion;
  h.op_byte = static_cast<uint8_t>(static_cast<uint8_t>(m.op) | (response ? kResponseBit : 0));
  h.request_id = m.request_id;
  h.user_id = m.user_id;
  h.status = static_cast<uint8_t>(m.status);
  h.flags = m.flags;
  h.body_len = static_cast<uint16_t>(body_len);
  return h;
}

}  // namespace

Decoded decode_request(std::span<const uint8_t> datagram) noexcept {
  return decode(datagram, false);
}

Decoded decode_response(std::span<const uint8_t> datagram) noexcept {
  return decode(datagram, true);
}

std::optional<Status> error_reply_status(DecodeError e) {
  switch (e) {
    case DecodeError::kOk:
    case DecodeError::kTooShort:
    case DecodeError::kBadMagic:
      return std::nullopt;
    case DecodeError::kBadVersion:
      return Status::kUnsupportedVersion;
    case DecodeError::kLengthMismatch:
    case DecodeError::kTlvOverrun:
    case DecodeError::kBadTlv:
    case DecodeError::kBadOp:
    case DecodeError::kBadField:
      return Status::kBadRequest;
  }
  return Status::kBadRequest;
}

size_t encode_request(const Message& m, std::span<uint8_t> out, size_t pad_to) noexcept {
  bool ok = false;
  const size_t core = kHeaderSize + tlv_size(m, ok);
  if (!ok) return 0;
  const size_t target = std::min(pad_to, kMaxDatagram);
  size_t pad = 0;
  if (core < target) pad = std::max(target - core, kTlvHeaderSize);
  const size_t total = core + pad;
  if (total > kMaxDatagram || out.size() < total) return 0;
  Writer w = write_header(Writer(out.data()), message_header(m, false, total - kHeaderSize));
  w = write_tlvs(w, m);
  write_padding(w, pad);
  return total;
}

size_t encode_response(const Message& m, std::span<uint8_t> out) noexcept {
  bool ok = false;
  const size_t total = kHeaderSize + tlv_size(m, ok);
  if (!ok || out.size() < total) return 0;
  write_tlvs(write_header(Writer(out.data()), message_header(m, true, total - kHeaderSize)), m);
  return total;
}

size_t encode_error_reply(const Header& request, Status status, std::span<uint8_t> out) noexcept {
  if (out.size() < kHeaderSize) return 0;
  Header h;
  h.version = kVersion;
  h.op_byte = static_cast<uint8_t>(request.op_byte | kResponseBit);
  h.request_id = request.request_id;
  h.user_id = request.user_id;
  h.status = static_cast<uint8_t>(status);
  write_header(Writer(out.data()), h);
  return kHeaderSize;
}

bool has_required_tlvs(const Message& m) {
  if (!m.response || m.status != Status::kOk) return true;
  switch (m.op) {
    case Op::kLogin:
    case Op::kHeartbeat:
      return m.endpoint.has_value();
    case Op::kLookup:
      return m.endpoint.has_value() && m.age.has_value();
    case Op::kLogout:
      return true;
    case Op::kPing:
      return m.table_version.has_value();
  }
  return false;
}

const char* to_string(Status s) {
  switch (s) {
    case Status::kOk:
      return "OK";
    case Status::kNotFound:
      return "NOT_FOUND";
    case Status::kBadRequest:
      return "BAD_REQUEST";
    case Status::kUnavailable:
      return "UNAVAILABLE";
    case Status::kTimeout:
      return "TIMEOUT";
    case Status::kUnauthorized:
      return "UNAUTHORIZED";
    case Status::kRateLimited:
      return "RATE_LIMITED";
    case Status::kUnsupportedVersion:
      return "UNSUPPORTED_VERSION";
  }
  return "UNKNOWN";
}

const char* to_string(Op op) {
  switch (op) {
    case Op::kLogin:
      return "LOGIN";
    case Op::kHeartbeat:
      return "HEARTBEAT";
    case Op::kLookup:
      return "LOOKUP";
    case Op::kLogout:
      return "LOGOUT";
    case Op::kPing:
      return "PING";
  }
  return "UNKNOWN";
}

const char* to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTooShort:
      return "too_short";
    case DecodeError::kBadMagic:
      return "bad_magic";
    case DecodeError::kBadVersion:
      return "bad_version";
    case DecodeError::kLengthMismatch:
      return "length_mismatch";
    case DecodeError::kTlvOverrun:
      return "tlv_overrun";
    case DecodeError::kBadTlv:
      return "bad_tlv";
    case DecodeError::kBadOp:
      return "bad_op";
    case DecodeError::kBadField:
      return "bad_field";
  }
  return "unknown";
}

}  // namespace imhash::client
