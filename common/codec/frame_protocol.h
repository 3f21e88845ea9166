// The login server <-> hash server frame protocol (docs/design.md §2, specified in
// docs/protocol.md). Pure codec: bytes in, structs or an error out; no I/O, no logging, no
// allocation on decode. Any thread may call these functions.
//
// Every frame: a 20-byte header, then a body whose layout depends on the type.
//   0  u32 length       bytes after this field (16 + body); at most kMaxFrameLength
//   4  u8  type         FrameType
//   5  u8  status       FrameStatus in responses, 0 in requests
//   6  u8  flags        FrameFlag bits
//   7  u8  reserved     0
//   8  u32 correlation  chosen by the sender of a request, echoed in its response
//   12 u64 table_version  request: the sender's table version; response: the server's
// All integers are big-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/codec/endpoint.h"
#include "common/codec/role.h"
#include "common/codec/stream_buffer.h"

namespace imhash::frame {

inline constexpr size_t kHeaderSize = 20;
inline constexpr uint32_t kMaxFrameLength = 64 * 1024;  // enforced by both sides
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kMaxNameLength = 255;

enum class FrameType : uint8_t {
  kHello = 1,   // handshake: binds the connection to one shard
  kUpsert = 2,  // store id -> endpoint
  kGet = 3,     // look an id up
  kDelete = 4,  // remove an id (LOGOUT)
  kStats = 5,   // the shard's counters
  kPurge = 6,   // start, cancel or query a lazy purge on the shard
  kPing = 7,    // liveness probe; empty body both ways
  kAuth = 8,    // handshake with a cluster key: the client's proof (common/security/link_auth.h)
  kImport = 9,  // hash server -> hash server: a batch of streamed records (docs/design.md §4,
                // "Streaming")
};

// Requests about one user id (their body starts with it), which a shard routes and checks.
constexpr bool is_keyed(FrameType t) {
  return t == FrameType::kUpsert || t == FrameType::kGet || t == FrameType::kDelete;
}

enum class FrameStatus : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kMoved = 2,         // the server has a newer table under which it does not own the id
  kBadRequest = 3,    // a HELLO on a bound connection, or a handshake that is not a HELLO
  kWrongShard = 4,    // the id does not belong to the shard this connection is bound to
  kUnsupported = 5,   // handshake: a protocol version the server does not speak
  kUnauthorized = 6,  // handshake: the peer did not prove the cluster key (or offered no proof to
                      // a server that requires one)
  kNotReady = 7,      // GET: this replica is still being refilled: it may not have the record,
                      // or not its latest write, yet (read another copy)
};

// Request flags.
enum FrameFlag : uint8_t {
  kFlagAnyOwner = 0x01,  // GET, DELETE: serve even if not owned (fallback read or old-copy delete
                         // during a range move)
  kFlagIfAbsent = 0x02,  // UPSERT: store only if the id has no record (read repair)
  kFlagAuth = 0x04,      // HELLO (request and OK response): carries the cluster-key handshake
  kFlagTls = 0x08,  // HELLO (request and OK response): TLS starts once the handshake is answered
  // GET NOT_FOUND response: the id was deleted here while ids may be moving (a tombstone), so no
  // earlier owner's copy is newer than that (no fallback read). Older login servers ignore it.
  kFlagDeleted = 0x10,
  // UPSERT, DELETE: the write says when it was made: age_seconds then holds the low 32 bits of the
  // Unix time in milliseconds when the login server received the client's request (a DELETE so
  // flagged carries it after the id). The member applies it unless a write of the id made after it
  // was applied there already: writes of one user reach a member by several connections (login
  // servers, their threads, writes held for it and replayed), and arrive in any order.
  // IMPORT: each record carries the Unix second it was last seen instead of its age, so a batch
  // that waited (a link down, a frozen receiver, a second boundary crossed on the way) is not
  // taken for newer than it is.
  // HELLO OK response: this server understands the two above. A sender sends timed frames only
  // to a server that said so (frame::untimed, import_records_to_ages for the others: an older
  // server reads the time as an age).
  kFlagTimed = 0x20,
};

// The handshake's sizes (common/security/link_auth.h): HELLO+kFlagAuth request: role (1) + client
// nonce; HELLO+kFlagAuth OK response: server nonce + server proof; AUTH request: the client proof.
inline constexpr size_t kHelloAuthRequestSize = 1 + 16;
inline constexpr size_t kHelloAuthResponseSize = 16 + 32;
inline constexpr size_t kAuthRequestSize = 32;

// IMPORT: a u16 count, then that many records, each: u64 id, u32 age_seconds, endpoint (as in
// UPSERT). The receiver stores a record unless it holds a newer one for the id or the id was
// deleted during the move (a tombstone); its OK carries no body.
inline constexpr size_t kMaxImportRecords = 1024;  // 1024 x 31 bytes: well inside one frame
struct ImportRecord {
  uint64_t id = 0;
  // Seconds since last seen; in an IMPORT with kFlagTimed, the Unix second last seen (the time of
  // the login server that took the write, as the record keeps it).
  uint32_t age_seconds = 0;
  Endpoint endpoint{};
  friend bool operator==(const ImportRecord&, const ImportRecord&) = default;
};
// Appends one record to the records of an IMPORT being built (Request::records points at them).
void append_import_record(const ImportRecord& record, std::vector<uint8_t>& records);
// Reads the next record off the front of a decoded IMPORT's `records` (decode_request validated
// them all); false when none is left.
bool next_import_record(std::string_view& records, ImportRecord& out);
// Turns the records of a timed IMPORT (each its last-seen Unix second) into ages at `now_s`, for
// a receiver that does not understand kFlagTimed. `records` must be well formed (as
// append_import_record makes them).
void import_records_to_ages(std::span<uint8_t> records, uint32_t now_s);

enum class PurgeAction : uint8_t {
  kStatus = 0,     // only report progress
  kNotOwned = 1,   // delete ids the server does not own under its current table
  kOlderThan = 2,  // delete records not refreshed for at least age_seconds
  kAll = 3,        // delete everything (a server re-joining after removal)
  kCancel = 4,
};

enum class PurgeState : uint8_t { kIdle = 0, kRunning = 1, kDone = 2, kCancelled = 3 };

struct PurgeProgress {
  PurgeState state = PurgeState::kIdle;
  PurgeAction kind = PurgeAction::kStatus;
  uint64_t scanned = 0;  // slots examined so far
  uint64_t total = 0;    // slots to examine
  uint64_t deleted = 0;  // records deleted so far
  friend bool operator==(const PurgeProgress&, const PurgeProgress&) = default;
};

// Stats: a count, then that many u64 values in this order; decoders ignore values they do not know,
// so new counters can be appended without a version bump.
enum StatIndex : uint8_t {
  kStatRecords,
  kStatMemoryBytes,
  kStatUpserts,
  kStatGets,
  kStatDeletes,
  kStatMoved,
  kStatPurged,
  kStatConnections,
  kStatBadFrames,
  kStatLongestTurnNs,  // the shard's longest event-loop turn since start-up, nanoseconds
  kStatCount,
};

struct Header {
  uint32_t length = 0;  // bytes after the length field
  FrameType type = FrameType::kPing;
  uint8_t status = 0;
  uint8_t flags = 0;
  uint32_t correlation = 0;
  uint64_t table_version = 0;
  size_t body_size() const { return length - (kHeaderSize - 4); }
};

// One decoded request (only the fields of its type are meaningful).
struct Request {
  FrameType type = FrameType::kPing;
  uint8_t flags = 0;
  uint32_t correlation = 0;
  uint64_t table_version = 0;
  uint64_t id = 0;      // UPSERT, GET, DELETE
  Endpoint endpoint{};  // UPSERT
  uint32_t age_seconds =
      0;  // UPSERT: age to record (read repair keeps it); PURGE
          // kOlderThan. With kFlagTimed (UPSERT, DELETE): when made, Unix ms mod 2^32
  uint16_t protocol_version = 0;  // HELLO
  uint16_t shard = 0;             // HELLO: the shard this connection serves
  std::string_view name{};        // HELLO: the peer's name (points into the decoded bytes)
  Role role = Role::kLogin;       // HELLO with kFlagAuth: who dials (the proofs bind it)
  // HELLO with kFlagAuth: the client nonce; AUTH: the client proof (binary, into the decoded bytes)
  std::string_view auth{};
  PurgeAction purge = PurgeAction::kStatus;  // PURGE
  uint16_t record_count = 0;                 // IMPORT
  std::string_view records{};                // IMPORT: the encoded records (into the decoded bytes)
  friend bool operator==(const Request&, const Request&) = default;
};

// One decoded response.
struct Response {
  FrameType type = FrameType::kPing;
  FrameStatus status = FrameStatus::kOk;
  uint8_t flags = 0;  // HELLO OK: kFlagAuth (the server's half of the handshake), kFlagTls
  uint32_t correlation = 0;
  uint64_t table_version = 0;
  Endpoint endpoint{};            // GET OK
  uint32_t age_seconds = 0;       // GET OK
  uint16_t protocol_version = 0;  // HELLO OK
  uint16_t shard_count = 0;       // HELLO OK
  std::string_view name{};        // HELLO OK: the server's name
  std::string_view auth{};        // HELLO OK with kFlagAuth: server nonce ‖ server proof (binary)
  PurgeProgress purge{};          // PURGE OK
  uint8_t stat_count = 0;         // STATS OK
  uint64_t stats[kStatCount] = {};
  friend bool operator==(const Response&, const Response&) = default;
};

enum class DecodeStatus : uint8_t {
  kOk,
  kNeedMore,     // the buffer ends inside a frame: read more bytes (not an error)
  kTooLarge,     // length field above kMaxFrameLength
  kTooSmall,     // length field below the header size
  kBadType,      // unknown frame type
  kBadBody,      // body too short, too long or with an invalid field for its type
  kBadReserved,  // reserved byte not zero
};
const char* to_string(DecodeStatus);
const char* to_string(FrameType);
const char* to_string(FrameStatus);

// Splits the next frame off a byte stream. On kOk, `header` and `body` describe it and `consumed`
// is its total size; on kNeedMore nothing is consumed. Any other result means the stream is
// unusable.
DecodeStatus next_frame(std::span<const uint8_t> in, Header& header, std::span<const uint8_t>& body,
                        size_t& consumed);

DecodeStatus decode_request(const Header& header, std::span<const uint8_t> body, Request& out);
// The user id of an UPSERT, GET or DELETE frame, read without decoding the rest of the body (to
// prefetch its record before the frame is handled); nullopt for other frames and short bodies.
// decode_request still validates the frame.
std::optional<uint64_t> peek_request_id(const Header& header, std::span<const uint8_t> body);
DecodeStatus decode_response(const Header& header, std::span<const uint8_t> body, Response& out);

// Hands each complete frame at the front of `in` to `on_frame(header, body)` (body points into
// `in`, valid during the call) and consumes it, until `on_frame` returns false or no complete frame
// is left. Returns kNeedMore when the buffer is exhausted (read more), kOk when `on_frame` stopped,
// and any other status when the stream is unusable (the offending frame is not consumed).
template <typename OnFrame>
DecodeStatus drain_frames(StreamBuffer& in, OnFrame&& on_frame) {
  for (;;) {
    Header header;
    std::span<const uint8_t> body;
    size_t used = 0;
    const DecodeStatus st = next_frame(in.data(), header, body, used);
    if (st != DecodeStatus::kOk) return st;
    const bool more = on_frame(header, body);
    in.consume(used);
    if (!more) return DecodeStatus::kOk;
  }
}

// Append one encoded frame to `out` (amortised: no allocation once `out` has grown).
void append_request(const Request& r, std::vector<uint8_t>& out);
// What a server that does not understand kFlagTimed is sent instead of timed frame `q`: an UPSERT
// whose age_seconds is the write's age at `now_unix_ms` in seconds, a DELETE without its time, an
// IMPORT whose records carry their ages (copied into `scratch`, which the result points into).
// Any other frame, or one without the flag, as it is.
Request untimed(const Request& q, uint64_t now_unix_ms, std::vector<uint8_t>& scratch);
void append_response(const Response& r, std::vector<uint8_t>& out);

}  // namespace imhash::frame
