#include "common/client_protocol.h"

#include <algorithm>

namespace imhash::client {

namespace {

// Largest PAD TLV: 2 header bytes + 255 value bytes.
constexpr size_t kMaxPadTlv = kTlvHeaderSize + 255;

uint16_t load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t load32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}
uint64_t load64(const uint8_t* p) { return uint64_t{load32(p)} << 32 | load32(p + 4); }

uint8_t* store8(uint8_t* p, uint8_t v) {
  *p = v;
  return p + 1;
}
uint8_t* store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
  return p + 2;
}
uint8_t* store32(uint8_t* p, uint32_t v) {
  p = store16(p, static_cast<uint16_t>(v >> 16));
  return store16(p, static_cast<uint16_t>(v));
}
uint8_t* store64(uint8_t* p, uint64_t v) {
  p = store32(p, static_cast<uint32_t>(v >> 32));
  return store32(p, static_cast<uint32_t>(v));
}

Header read_header(const uint8_t* p) {
  Header h;
  h.version = p[2];
  h.op_byte = p[3];
  h.request_id = load32(p + 4);
  h.user_id = load64(p + 8);
  h.status = p[16];
  h.flags = p[17];
  h.body_len = load16(p + 18);
  return h;
}

uint8_t* write_header(uint8_t* p, const Header& h) {
  p = store8(p, kMagic[0]);
  p = store8(p, kMagic[1]);
  p = store8(p, h.version);
  p = store8(p, h.op_byte);
  p = store32(p, h.request_id);
  p = store64(p, h.user_id);
  p = store8(p, h.status);
  p = store8(p, h.flags);
  return store16(p, h.body_len);
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
      e.port = load16(v.data() + 1);
      std::copy(v.begin() + 3, v.end(), e.addr.begin());
      m.endpoint = e;
      return DecodeError::kOk;
    }
    case TlvType::kAge:
      if (m.age || v.size() != kAgeLen) return DecodeError::kBadTlv;
      m.age = load32(v.data());
      return DecodeError::kOk;
    case TlvType::kToken: {
      if (m.token || v.size() != kTokenLen) return DecodeError::kBadTlv;
      Token t;
      t.user_id = load64(v.data());
      t.expiry = load32(v.data() + 8);
      std::copy(v.begin() + 12, v.end(), t.mac.begin());
      m.token = t;
      return DecodeError::kOk;
    }
    case TlvType::kTableVersion:
      if (m.table_version || v.size() != kTableVersionLen) return DecodeError::kBadTlv;
      m.table_version = load64(v.data());
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

uint8_t* write_tlvs(uint8_t* p, const Message& m) {
  if (m.endpoint) {
    const Endpoint& e = *m.endpoint;
    const size_t addr_len = e.addr_len();
    p = store8(p, static_cast<uint8_t>(TlvType::kEndpoint));
    p = store8(p, static_cast<uint8_t>(1 + 2 + addr_len));
    p = store8(p, e.family);
    p = store16(p, e.port);
    p = std::copy_n(e.addr.begin(), addr_len, p);
  }
  if (m.age) {
    p = store8(p, static_cast<uint8_t>(TlvType::kAge));
    p = store8(p, static_cast<uint8_t>(kAgeLen));
    p = store32(p, *m.age);
  }
  if (m.token) {
    p = store8(p, static_cast<uint8_t>(TlvType::kToken));
    p = store8(p, static_cast<uint8_t>(kTokenLen));
    p = store64(p, m.token->user_id);
    p = store32(p, m.token->expiry);
    p = std::copy(m.token->mac.begin(), m.token->mac.end(), p);
  }
  if (m.table_version) {
    p = store8(p, static_cast<uint8_t>(TlvType::kTableVersion));
    p = store8(p, static_cast<uint8_t>(kTableVersionLen));
    p = store64(p, *m.table_version);
  }
  return p;
}

// Writes `n` bytes (0 or >= 2) of PAD TLVs with zero values.
uint8_t* write_padding(uint8_t* p, size_t n) {
  while (n > 0) {
    size_t chunk = n;
    // Never leave a 1-byte remainder, which no TLV can fill.
    if (chunk > kMaxPadTlv) chunk = (n - kMaxPadTlv == 1) ? kMaxPadTlv - 1 : kMaxPadTlv;
    p = store8(p, static_cast<uint8_t>(TlvType::kPad));
    p = store8(p, static_cast<uint8_t>(chunk - kTlvHeaderSize));
    p = std::fill_n(p, chunk - kTlvHeaderSize, uint8_t{0});
    n -= chunk;
  }
  return p;
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
  uint8_t* p = write_header(out.data(), message_header(m, false, total - kHeaderSize));
  p = write_tlvs(p, m);
  write_padding(p, pad);
  return total;
}

size_t encode_response(const Message& m, std::span<uint8_t> out) noexcept {
  bool ok = false;
  const size_t total = kHeaderSize + tlv_size(m, ok);
  if (!ok || out.size() < total) return 0;
  uint8_t* p = write_header(out.data(), message_header(m, true, total - kHeaderSize));
  write_tlvs(p, m);
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
  write_header(out.data(), h);
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
