// Codec for the client UDP protocol, version 1 (docs/design.md §1): datagram bytes <-> Message.
// Pure functions over caller-owned memory: no I/O, no logging, no exceptions, no heap allocation.
// Any thread may call any of them concurrently.
//
// Wire details that §1 leaves open, decided here and pinned by tests/unit/client_protocol_test.cpp:
// - All integers are big-endian. TLV = type (1), length (1), value (length bytes).
// - TLV value lengths: ENDPOINT 7 (family 4) or 19 (family 6), AGE 4, TOKEN 28, TABLE_VERSION 8.
//   A known TLV with another length, an ENDPOINT whose family is not 4/6 or disagrees with its
//   length, or a known TLV that appears twice, is kBadTlv. PAD (any length) may appear anywhere and
//   any number of times; unknown types (5..255) are skipped.
// - The decoder checks structure, not which TLVs an op "should" carry: a known TLV outside the op's
//   table in §1 (say AGE in a LOGIN request) is decoded and left for the caller to ignore.
//   has_required_tlvs() tells whether an OK response carries what §1 promises.
// - An ENDPOINT of family 6 holding ::ffff:a.b.c.d is returned as given; mapping it to family 4 is
//   the server's job (Endpoint::unmapped()).
// - Header checks: requests need status 0, flags 0, and user_id 0 on PING; responses need flags 0
//   and a status defined in version 1 (0..7). User id 0 is otherwise accepted (policy, not
//   framing).
// - Order of checks (the first failure is reported): < 20 bytes -> kTooShort; magic -> kBadMagic;
//   (header now readable) request < 48 bytes -> kTooShort; version -> kBadVersion; length ->
//   kLengthMismatch; op -> kBadOp; status/flags/user_id -> kBadField; TLVs in order -> kTlvOverrun
//   or kBadTlv. So a short datagram is dropped even when its version is wrong (no reply under 48
//   bytes).
// - Encoders write TLVs in the order ENDPOINT, AGE, TOKEN, TABLE_VERSION, then (requests only) PAD
//   with zero value bytes. Status and flags are written as given, so tests can build bad requests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "common/codec/endpoint.h"

namespace imhash::client {

inline constexpr size_t kHeaderSize = 20;
inline constexpr size_t kMinDatagram = 48;  // requests shorter than this get no reply
inline constexpr size_t kMaxDatagram = 20 + 65535;
inline constexpr uint8_t kVersion = 1;
inline constexpr std::array<uint8_t, 2> kMagic = {0x49, 0x48};  // "IH"
inline constexpr uint8_t kResponseBit = 0x80;

inline constexpr size_t kTlvHeaderSize = 2;
inline constexpr size_t kEndpointV4Len = 7;   // family (1), port (2), address (4)
inline constexpr size_t kEndpointV6Len = 19;  // family (1), port (2), address (16)
inline constexpr size_t kAgeLen = 4;
inline constexpr size_t kTokenLen = 28;  // user_id (8), expiry (4), MAC (16)
inline constexpr size_t kTableVersionLen = 8;

enum class Op : uint8_t { kLogin = 1, kHeartbeat = 2, kLookup = 3, kLogout = 4, kPing = 5 };

enum class Status : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kBadRequest = 2,
  kUnavailable = 3,
  kTimeout = 4,
  kUnauthorized = 5,
  kRateLimited = 6,
  kUnsupportedVersion = 7,
};

enum class TlvType : uint8_t { kPad = 0, kEndpoint = 1, kAge = 2, kToken = 3, kTableVersion = 4 };

constexpr bool is_known(Op op) { return op >= Op::kLogin && op <= Op::kPing; }
constexpr bool is_known(Status s) { return s <= Status::kUnsupportedVersion; }

// docs/design.md §6: user_id ‖ expiry ‖ first 16 bytes of the HMAC. The codec only carries it.
struct Token {
  uint64_t user_id = 0;
  uint32_t expiry = 0;  // Unix seconds
  std::array<uint8_t, 16> mac{};

  friend bool operator==(const Token&, const Token&) = default;
};

// The 20 header bytes as read, before any validation beyond the magic.
struct Header {
  uint8_t version = 0;
  uint8_t op_byte = 0;  // raw, including kResponseBit
  uint32_t request_id = 0;
  uint64_t user_id = 0;
  uint8_t status = 0;
  uint8_t flags = 0;
  uint16_t body_len = 0;

  bool is_response() const { return (op_byte & kResponseBit) != 0; }
  Op op() const { return static_cast<Op>(op_byte & 0x7f); }

  friend bool operator==(const Header&, const Header&) = default;
};

// A decoded request or response. Absent optionals mean the TLV was not in the body.
struct Message {
  Op op = Op::kPing;
  bool response = false;
  uint32_t request_id = 0;
  uint64_t user_id = 0;
  Status status = Status::kOk;
  uint8_t flags = 0;
  std::optional<Endpoint> endpoint;  // family 4 keeps addr[4..15] zero
  std::optional<uint32_t> age;
  std::optional<Token> token;
  std::optional<uint64_t> table_version;

  friend bool operator==(const Message&, const Message&) = default;
};

enum class DecodeError : uint8_t {
  kOk,
  kTooShort,        // < 20 bytes, or (requests) < 48 bytes: drop silently, count
  kBadMagic,        // drop silently, count
  kBadVersion,      // answer UNSUPPORTED_VERSION, header only
  kLengthMismatch,  // datagram length != 20 + body_len -> BAD_REQUEST
  kTlvOverrun,      // a TLV header or value runs past the body -> BAD_REQUEST
  kBadTlv,          // known TLV with a wrong length / family, or a duplicate -> BAD_REQUEST
  kBadOp,           // unknown op, or a response op where a request was expected (or vice versa)
  kBadField,        // see "Header checks" above -> BAD_REQUEST
};

struct Decoded {
  DecodeError error = DecodeError::kOk;
  // True whenever the magic matched and 20 header bytes were read, so the caller can build an error
  // reply echoing op and request_id even when the rest is bad. `header` is meaningful only then.
  bool header_valid = false;
  Header header{};
  Message msg{};  // meaningful only when error == kOk
};

// Enforces the 48-byte minimum.
Decoded decode_request(std::span<const uint8_t> datagram) noexcept;
// No 48-byte minimum: responses are not padded.
Decoded decode_response(std::span<const uint8_t> datagram) noexcept;

// The status a server answers a request that failed to decode with (header only, via
// encode_error_reply), or nullopt when it must not answer at all (kTooShort, kBadMagic) or the
// request was fine (kOk).
std::optional<Status> error_reply_status(DecodeError e);

// Encoders write into caller storage and return bytes written, or 0 if `out` is too small or the
// message cannot be encoded (op not 1..5, or an endpoint whose family is not 4/6).
//
// encode_request writes the request op byte whatever m.response says, and pads with a PAD TLV to at
// least min(pad_to, kMaxDatagram) bytes. A TLV is at least 2 bytes, so a shortfall of exactly 1
// byte pads 2 (the result is then pad_to + 1); a shortfall above 257 bytes takes several PAD TLVs.
size_t encode_request(const Message& m, std::span<uint8_t> out,
                      size_t pad_to = kMinDatagram) noexcept;
// Writes op | 0x80 whatever m.response says; never pads. Every version-1 OK answer fits in 48 bytes
// (the largest, LOOKUP with an IPv6 ENDPOINT and AGE, is 20 + 21 + 6 = 47).
size_t encode_response(const Message& m, std::span<uint8_t> out) noexcept;
// A reply carrying only the header: version 1 (even when the request's version was wrong), the
// request's op | 0x80, request_id and user_id, `status`, flags 0, body_len 0. Always 20 bytes.
size_t encode_error_reply(const Header& request, Status status, std::span<uint8_t> out) noexcept;

// True unless m is an OK response missing a TLV that §1 promises: ENDPOINT for LOGIN and HEARTBEAT,
// ENDPOINT and AGE for LOOKUP, TABLE_VERSION for PING.
bool has_required_tlvs(const Message& m);

// Names as in docs/design.md §1 ("LOGIN", "NOT_FOUND"); decode errors in snake_case for counters
// ("too_short"). Unknown values give "UNKNOWN" / "unknown".
const char* to_string(Status s);
const char* to_string(Op op);
const char* to_string(DecodeError e);

}  // namespace imhash::client
