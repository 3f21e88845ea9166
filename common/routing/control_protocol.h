// The config-server link protocol (docs/design.md §4, §5): how hash and login servers talk to the
// config server. Pure codec: bytes in, structs or an error out; no I/O, no logging. Any thread may
// call these functions; the types are plain values.
//
// A TCP stream of frames: a u32 big-endian length, then that many bytes of one JSON object (UTF-8)
// with a "type" member. A frame longer than kMaxMessageSize is refused from its length prefix
// alone, before any of its body is buffered.
//
//   node -> config, first when the node has a cluster key (common/security/link_auth.h; hex
//   strings):
//     {"type":"auth_hello","role":"hash"|"login","name":S,"nonce":HEX32}
//     {"type":"auth_proof","proof":HEX64}         (after the config server's auth_challenge)
//   node -> config
//     {"type":"register","role":"hash"|"login","name":S,"address":S,"shards":N,"version":N,"pid":N,
//      "fresh":BOOL,"filling":BOOL}
//     {"type":"heartbeat","version":N,"stats":{"KEY":NUMBER,...},"held_writes":{S:N,...},
//      "sent_us":N,"seen_version":N}
//     {"type":"ack","version":N}
//     {"type":"purge_report","shards":[{"shard":N,"state":S,"kind":S,"scanned":N,"total":N,
//                                       "deleted":N,"id":N},...]}
//     {"type":"stream_report","version":N,"state":S,"scanned":N,"total":N,"sent":N,"rate":N,
//      "eta_ms":N,"restarts":N,"targets":[{"name":S,"records":N},...],"lost":[S,...]}
//   config -> node
//     {"type":"auth_challenge","nonce":HEX32,"proof":HEX64}   (the answer to an auth_hello)
//     {"type":"welcome","heartbeat_ms":N,"config_version":N}
//     {"type":"table","table":TABLE,"previous":TABLE|null,"grace_ms":N}
//                                      (again, of the version a login server runs, while the
//                                      version's streams run: it extends its grace periods)
//     {"type":"purge","action":S,"age_s":N,"id":N}
//     {"type":"stream","action":"start"|"cancel","version":N,"lost":[S,...]}
//     {"type":"fill","filling":BOOL}
//     {"type":"refused","reason":S,"leader":S}   (instead of a welcome: the registration is
//                                      refused; the config server closes the link after it)
//
// TABLE is the table-file JSON of common/routing/table_json.h, read in place with read_table's
// checks (unknown keys rejected there too) and validated. Integers are plain JSON integers (no
// fraction, no exponent, not negative). Every listed member is required except "previous" (absent
// means null). Members a decoder does not know are ignored, so nodes and config servers of
// different versions can add fields; a missing member or one of the wrong type is an error naming
// it by its path, after the message type ("table: \"table.servers[0].name\" is missing"). Stats
// values are integers (kept exactly) or finite fractions (kept to within the precision of the JSON
// library).
#pragma once

#include <array>
#include <boost/json/object.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/codec/bytes.h"
#include "common/codec/frame_protocol.h"
#include "common/codec/role.h"
#include "common/codec/stream_buffer.h"
#include "common/routing/table.h"

namespace imhash::control {

inline constexpr size_t kLengthPrefixSize = 4;
inline constexpr uint32_t kMaxMessageSize = 16 << 20;  // JSON bytes after the prefix

// ---- node -> config ----

struct Register {
  Role role = Role::kHash;
  std::string name;
  std::string address;   // hash: its TCP listener "HOST:PORT"; login: its UDP address
  uint32_t shards = 0;   // hash: its shard count; login: 0
  uint64_t version = 0;  // table version it runs, 0 if none
  uint64_t pid = 0;
  // Hash servers (optional, false when absent): "fresh", the process has not registered before
  // (it started empty: memory only); "filling", it was being refilled and is not yet complete.
  // With replicas the config server has the other replicas refill such a server.
  bool fresh = false;
  bool filling = false;
  friend bool operator==(const Register&, const Register&) = default;
};

struct Heartbeat {
  uint64_t version = 0;
  boost::json::object stats;  // numbers only; other values are left out when encoding
  // Login servers with replicas: the writes held for each hash server (by name) because its
  // links could not take them (RequestFlow's hints), summed over shards and workers: what that
  // server has not applied yet. Optional ("held_writes", absent when empty), at most kMaxServers.
  std::map<std::string, uint64_t> held_writes;
  // When the node sent it: Unix time in microseconds (optional "sent_us", 0 when absent). The
  // config server measures how late it handles heartbeats from it (the same clock only on one
  // host; across hosts the figure includes the clocks' offset).
  uint64_t sent_us = 0;
  // Login servers: the newest table version a hash server has answered MOVED with, when newer
  // than `version` (optional "seen_version", 0 when absent): proof that version was pushed, so a
  // config leader that has just taken over and holds it back (cluster::TakeoverHold) pushes it.
  uint64_t seen_version = 0;
  friend bool operator==(const Heartbeat&, const Heartbeat&) = default;
};

struct Ack {
  uint64_t version = 0;  // the table version now installed
  friend bool operator==(const Ack&, const Ack&) = default;
};

// One shard's purge progress (frame::PurgeProgress plus the shard number).
struct PurgeShard {
  uint32_t shard = 0;
  frame::PurgeState state = frame::PurgeState::kIdle;
  frame::PurgeAction kind = frame::PurgeAction::kStatus;
  uint64_t scanned = 0;
  uint64_t total = 0;
  uint64_t deleted = 0;
  // The id of the purge command the shard ran ("id", optional: 0 for a purge started over the
  // frame protocol, or by a node that does not know ids). A config server waiting for a purge it
  // sent takes it as done only from a report carrying that command's id.
  uint64_t id = 0;
  friend bool operator==(const PurgeShard&, const PurgeShard&) = default;
};

struct PurgeReport {
  std::vector<PurgeShard> shards;
  friend bool operator==(const PurgeReport&, const PurgeReport&) = default;
};

// A hash server's outbound stream (docs/design.md, "Streaming"): it sends every record it holds
// whose id another server owns under its current table to that owner, and reports progress while
// it runs and once when its state changes. kDone at `version`: every record this server held that
// is not its own under table `version` has been acknowledged by its owner.
enum class StreamState : uint8_t { kIdle = 0, kRunning = 1, kDone = 2, kCancelled = 3 };
struct StreamTarget {
  std::string name;      // the hash server records go to
  uint64_t records = 0;  // records it acknowledged so far in this stream
  friend bool operator==(const StreamTarget&, const StreamTarget&) = default;
};
struct StreamReport {
  uint64_t version = 0;  // the table the stream runs (or ran) against
  StreamState state = StreamState::kIdle;
  uint64_t scanned = 0;   // slots examined, over all shards
  uint64_t total = 0;     // slots to examine (an estimate until done)
  uint64_t sent = 0;      // records acknowledged by their new owners
  uint64_t rate = 0;      // records per second over the last second or so
  uint64_t eta_ms = 0;    // estimated time to done (0 when not running)
  uint64_t restarts = 0;  // times the scan started again (a newer table, a link lost)
  std::vector<StreamTarget> targets;
  // The servers this stream refills (StreamCommand::lost), echoed so the config server knows
  // which "done" completes a refill. Optional ("lost", absent when empty).
  std::vector<std::string> lost;
  friend bool operator==(const StreamReport&, const StreamReport&) = default;
};

// ---- config -> node ----

struct Welcome {
  uint32_t heartbeat_ms = 1000;  // 0: the node's default
  uint64_t config_version = 0;   // the config server's current table version
  friend bool operator==(const Welcome&, const Welcome&) = default;
};

struct TablePush {
  Table table;
  std::optional<Table> previous;  // the version before, for fallback reads during the grace period
  uint64_t grace_ms = 0;
  friend bool operator==(const TablePush&, const TablePush&) = default;
};

struct PurgeCommand {
  frame::PurgeAction action = frame::PurgeAction::kStatus;
  uint32_t age_seconds = 0;  // "age_s": kOlderThan only
  uint64_t id = 0;           // echoed in the purge reports of this purge ("id", optional)
  friend bool operator==(const PurgeCommand&, const PurgeCommand&) = default;
};

// Starts (or restarts from the beginning) a hash server's outbound stream once it runs table
// `version` or newer, or cancels the one running.
enum class StreamAction : uint8_t { kStart = 0, kCancel = 1 };
//
// `lost` (optional, absent when empty; replicas only): servers that lost their records (restarted
// empty). The stream sends them every record whose replica set includes them, whatever they held
// before (Handoff::start), and the report echoes them.
struct StreamCommand {
  StreamAction action = StreamAction::kStart;
  uint64_t version = 0;
  std::vector<std::string> lost;
  friend bool operator==(const StreamCommand&, const StreamCommand&) = default;
};

// Tells a hash server whether it is being refilled (replicas: it restarted empty and its peers
// stream it its records). While filling, a LOOKUP of an id it does not hold is answered
// NOT_READY rather than NOT_FOUND, so the login server reads another copy.
struct FillCommand {
  bool filling = false;
  friend bool operator==(const FillCommand&, const FillCommand&) = default;
};

// The answer to a registration the config server will not take (e.g. a hash server registering an
// address nobody can dial); the node logs the reason and tries again later.
struct Refused {
  std::string reason;  // one sentence
  // A standby config server (several against one store, docs/design.md §5): the node address
  // ("HOST:PORT") of the leader, which the node dials next if it knows it (optional, "" when
  // absent or unknown).
  std::string leader;
  friend bool operator==(const Refused&, const Refused&) = default;
};

// The cluster-key handshake (common/security/link_auth.h): nonces and proofs as lower-case hex,
// checked for length and digits where they are used (link_auth::from_hex).
struct AuthHello {
  Role role = Role::kHash;
  std::string name;
  std::string nonce;  // the node's, 32 hex digits
  friend bool operator==(const AuthHello&, const AuthHello&) = default;
};
struct AuthChallenge {
  std::string nonce;  // the config server's, 32 hex digits
  std::string proof;  // its proof, 64 hex digits
  friend bool operator==(const AuthChallenge&, const AuthChallenge&) = default;
};
struct AuthProof {
  std::string proof;  // the node's proof, 64 hex digits
  friend bool operator==(const AuthProof&, const AuthProof&) = default;
};

using Message =
    std::variant<Register, Heartbeat, Ack, PurgeReport, Welcome, TablePush, PurgeCommand, Refused,
                 AuthHello, AuthChallenge, AuthProof, StreamReport, StreamCommand, FillCommand>;

enum class DecodeStatus : uint8_t {
  kOk,
  kNeedMore,    // the input ends inside a frame: read more bytes (not an error)
  kTooLarge,    // the length prefix is above kMaxMessageSize (or the receiver's lower limit)
  kBadJson,     // the body is not one well-formed UTF-8 JSON document
  kBadMessage,  // valid JSON but not a valid message: not an object, unknown type, a member
                // missing or of the wrong type, an invalid table
};

// Appends one framed message to `out`. Never fails; the result decodes to an equal message as long
// as the tables in it are valid and it fits in kMaxMessageSize (a caller sending large tables
// checks the size it appended; the receiver refuses larger frames).
void append_message(const Message& m, std::vector<uint8_t>& out);

// Decodes the first frame of `in`. kOk: `out` holds the message and `consumed` is the frame's size.
// A length prefix above `max_size` (at most kMaxMessageSize; a receiver that expects only small
// messages passes its own, lower limit) is kTooLarge. kNeedMore, kTooLarge: `consumed` is 0.
// kBadJson, kBadMessage: `consumed` is the frame's size (the framing is intact, so a lenient reader
// could skip it) and `error` says what is wrong. `error` is set for every status but kOk and
// kNeedMore. Never throws (even out of memory is a kBadMessage).
DecodeStatus next_message(std::span<const uint8_t> in, Message& out, size_t& consumed,
                          std::string& error, uint32_t max_size = kMaxMessageSize);

// Hands each complete message at the front of `in` to `on_message(Message&)` and consumes it,
// until `on_message` returns false or no complete message is left; a message whose length prefix
// has arrived gets room in `in` (up to `max_size`, as for next_message). Returns kNeedMore when the
// buffer is exhausted (read more), kOk when `on_message` stopped, and otherwise the error, with
// `error` set.
template <typename OnMessage>
DecodeStatus drain_messages(StreamBuffer& in, std::string& error, OnMessage&& on_message,
                            uint32_t max_size = kMaxMessageSize) {
  for (;;) {
    Message m;
    size_t used = 0;
    const DecodeStatus st = next_message(in.data(), m, used, error, max_size);
    if (st == DecodeStatus::kNeedMore) {
      if (in.data().size() >= kLengthPrefixSize) {
        in.expect(kLengthPrefixSize + bytes::get_u32(in.data().data()));
      }
      return st;
    }
    if (st != DecodeStatus::kOk) return st;
    in.consume(used);
    if (!on_message(m)) return DecodeStatus::kOk;
  }
}

inline constexpr std::array kPurgeActions{
    frame::PurgeAction::kStatus, frame::PurgeAction::kNotOwned, frame::PurgeAction::kOlderThan,
    frame::PurgeAction::kAll, frame::PurgeAction::kCancel};
inline constexpr std::array kStreamStates{StreamState::kIdle, StreamState::kRunning,
                                          StreamState::kDone, StreamState::kCancelled};
inline constexpr std::array kStreamActions{StreamAction::kStart, StreamAction::kCancel};
inline constexpr std::array kPurgeStates{frame::PurgeState::kIdle, frame::PurgeState::kRunning,
                                         frame::PurgeState::kDone, frame::PurgeState::kCancelled};

// One shard's progress as a purge_report carries it: {"shard", "state", "kind", "scanned",
// "total", "deleted", "id"}.
boost::json::object purge_shard_json(const PurgeShard& s);

const char* to_string(DecodeStatus s);
// The wire names of the purge vocabulary: "status", "not_owned", "older_than", "all", "cancel";
// "idle", "running", "done", "cancelled".
const char* purge_action_name(frame::PurgeAction a);
std::optional<frame::PurgeAction> parse_purge_action(std::string_view text);
const char* purge_state_name(frame::PurgeState s);
std::optional<frame::PurgeState> parse_purge_state(std::string_view text);
// "idle", "running", "done", "cancelled"; "start", "cancel".
const char* stream_state_name(StreamState s);
const char* stream_action_name(StreamAction a);
// A stream report as JSON, without its "type" (imctl status and the admin API show it as is).
boost::json::object stream_report_json(const StreamReport& r);
// The "type" of a message: "register", "heartbeat", ...
const char* type_name(const Message& m);

}  // namespace imhash::control
