#include "common/routing/control_protocol.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <exception>
#include <iterator>
#include <limits>
#include <utility>

#include "common/codec/bytes.h"
#include "common/codec/enum_names.h"
#include "common/codec/printable.h"
#include "common/routing/json_fields.h"
#include "common/routing/table_json.h"

namespace imhash::control {
namespace {

namespace json = boost::json;
using frame::PurgeAction;
using frame::PurgeState;

// ---- encoding -----------------------------------------------------------------------------------

void append_frame(std::string_view body, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  out.resize(start + kLengthPrefixSize);
  bytes::put_u32(out.data() + start, static_cast<uint32_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
}

// Only values the decoder accepts: integers and finite fractions (Boost.JSON would write an
// infinity as a bare `Infinity`, which is not JSON).
json::object clean_stats(const json::object& stats) {
  json::object out;
  for (const auto& [key, value] : stats) {
    if (value.is_int64() || value.is_uint64() ||
        (value.is_double() && std::isfinite(value.get_double()))) {
      out.emplace(key, value);
    }
  }
  return out;
}

struct Encoder {
  std::vector<uint8_t>& out;

  void operator()(const Register& m) {
    json::object o;
    o["type"] = "register";
    o["role"] = to_string(m.role);
    o["name"] = m.name;
    o["address"] = m.address;
    o["shards"] = m.shards;
    o["version"] = m.version;
    o["pid"] = m.pid;
    if (m.fresh) o["fresh"] = true;
    if (m.filling) o["filling"] = true;
    append_frame(json::serialize(o), out);
  }
  void operator()(const Heartbeat& m) {
    json::object o;
    o["type"] = "heartbeat";
    o["version"] = m.version;
    o["stats"] = clean_stats(m.stats);
    if (!m.held_writes.empty()) {
      json::object held;
      for (const auto& [name, n] : m.held_writes) held[name] = n;
      o["held_writes"] = std::move(held);
    }
    if (m.sent_us != 0) o["sent_us"] = m.sent_us;
    if (m.seen_version != 0) o["seen_version"] = m.seen_version;
    append_frame(json::serialize(o), out);
  }
  void operator()(const Ack& m) {
    json::object o;
    o["type"] = "ack";
    o["version"] = m.version;
    append_frame(json::serialize(o), out);
  }
  void operator()(const PurgeReport& m) {
    json::array shards;
    shards.reserve(m.shards.size());
    for (const PurgeShard& s : m.shards) shards.push_back(purge_shard_json(s));
    json::object o;
    o["type"] = "purge_report";
    o["shards"] = std::move(shards);
    append_frame(json::serialize(o), out);
  }
  void operator()(const Welcome& m) {
    json::object o;
    o["type"] = "welcome";
    o["heartbeat_ms"] = m.heartbeat_ms;
    o["config_version"] = m.config_version;
    append_frame(json::serialize(o), out);
  }
  void operator()(const TablePush& m) {
    // The tables are spliced in as table_to_json writes them, so they read back exactly as a
    // table file would.
    std::string body = R"({"type":"table","grace_ms":)" + std::to_string(m.grace_ms);
    body += R"(,"table":)";
    body += table_to_json(m.table);
    body += R"(,"previous":)";
    body += m.previous ? table_to_json(*m.previous) : "null";
    body += '}';
    append_frame(body, out);
  }
  void operator()(const PurgeCommand& m) {
    json::object o;
    o["type"] = "purge";
    o["action"] = purge_action_name(m.action);
    o["age_s"] = m.age_seconds;
    o["id"] = m.id;
    append_frame(json::serialize(o), out);
  }
  void operator()(const Refused& m) {
    json::object o;
    o["type"] = "refused";
    o["reason"] = m.reason;
    if (!m.leader.empty()) o["leader"] = m.leader;
    append_frame(json::serialize(o), out);
  }
  void operator()(const AuthHello& m) {
    json::object o;
    o["type"] = "auth_hello";
    o["role"] = to_string(m.role);
    o["name"] = m.name;
    o["nonce"] = m.nonce;
    append_frame(json::serialize(o), out);
  }
  void operator()(const AuthChallenge& m) {
    json::object o;
    o["type"] = "auth_challenge";
    o["nonce"] = m.nonce;
    o["proof"] = m.proof;
    append_frame(json::serialize(o), out);
  }
  void operator()(const StreamReport& m) {
    json::object o = stream_report_json(m);
    o["type"] = "stream_report";
    append_frame(json::serialize(o), out);
  }
  void operator()(const StreamCommand& m) {
    json::object o;
    o["type"] = "stream";
    o["action"] = stream_action_name(m.action);
    o["version"] = m.version;
    if (!m.lost.empty()) o["lost"] = json::array(m.lost.begin(), m.lost.end());
    append_frame(json::serialize(o), out);
  }
  void operator()(const FillCommand& m) {
    json::object o;
    o["type"] = "fill";
    o["filling"] = m.filling;
    append_frame(json::serialize(o), out);
  }
  void operator()(const AuthProof& m) {
    json::object o;
    o["type"] = "auth_proof";
    o["proof"] = m.proof;
    append_frame(json::serialize(o), out);
  }
};

// ---- decoding -----------------------------------------------------------------------------------

// A table pushed in a message, read in place and validated; an invalid one is the error
// `"table" is not a valid table: ...`.
bool read_pushed_table(JsonValue value, Table& out) {
  JsonObject o = value.object(UnknownKeys::kReject);  // as strict as a table file
  if (!read_table(o, out)) return false;
  if (std::string error = validate(out); !error.empty()) {
    return value.fail("is not a valid table: " + error);
  }
  return true;
}

bool decode_register(JsonObject& o, Register& m) {
  o.need("role").choice(m.role, kRoles, imhash::to_string);
  o.need("name").string(m.name);
  o.need("address").string(m.address);
  o.need("shards").integer(m.shards);
  o.need("version").integer(m.version);
  o.need("pid").integer(m.pid);
  o.get("fresh").boolean(m.fresh);
  o.get("filling").boolean(m.filling);
  return o.ok();
}

bool decode_heartbeat(JsonObject& o, Heartbeat& m) {
  o.need("version").integer(m.version);
  JsonObject stats = o.need("stats").object(UnknownKeys::kIgnore);
  for (const auto& entry : stats.members()) {
    if (!stats.get(entry.key()).number()) return false;
  }
  if (JsonValue held = o.get("held_writes"); held.present()) {
    JsonObject h = held.object(UnknownKeys::kIgnore);
    if (h.members().size() > kMaxServers) return held.fail("must name at most 1024 servers");
    for (const auto& entry : h.members()) {
      if (entry.key().empty() || entry.key().size() > kMaxServerNameLength) {
        return held.fail("must name servers of 1 to 64 characters");
      }
      uint64_t n = 0;
      if (!h.get(entry.key()).integer(n)) return false;
      m.held_writes[std::string(entry.key())] = n;
    }
  }
  o.get("sent_us").integer(m.sent_us);
  o.get("seen_version").integer(m.seen_version);
  if (!o.ok()) return false;
  m.stats = stats.members();
  return true;
}

bool decode_purge_report(JsonObject& o, PurgeReport& m) {
  JsonArray shards = o.need("shards").array(std::numeric_limits<size_t>::max());
  m.shards.resize(shards.size());
  for (size_t i = 0; i < shards.size() && o.ok(); ++i) {
    JsonObject s = shards[i].object(UnknownKeys::kIgnore);
    PurgeShard& p = m.shards[i];
    s.need("shard").integer(p.shard);
    s.need("state").choice(p.state, kPurgeStates, purge_state_name);
    s.need("kind").choice(p.kind, kPurgeActions, purge_action_name);
    s.need("scanned").integer(p.scanned);
    s.need("total").integer(p.total);
    s.need("deleted").integer(p.deleted);
    s.get("id").integer(p.id);
  }
  return o.ok();
}

// An optional array of server names.
void read_names(JsonValue value, std::vector<std::string>& out) {
  JsonArray names = value.array(kMaxServers);
  out.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) names[i].string(out[i]);
}

bool decode_stream_report(JsonObject& o, StreamReport& m) {
  o.need("version").integer(m.version);
  o.need("state").choice(m.state, kStreamStates, stream_state_name);
  o.need("scanned").integer(m.scanned);
  o.need("total").integer(m.total);
  o.need("sent").integer(m.sent);
  o.need("rate").integer(m.rate);
  o.need("eta_ms").integer(m.eta_ms);
  o.need("restarts").integer(m.restarts);
  JsonArray targets = o.need("targets").array(std::numeric_limits<size_t>::max());
  m.targets.resize(targets.size());
  for (size_t i = 0; i < targets.size() && o.ok(); ++i) {
    JsonObject t = targets[i].object(UnknownKeys::kIgnore);
    t.need("name").string(m.targets[i].name);
    t.need("records").integer(m.targets[i].records);
  }
  read_names(o.get("lost"), m.lost);
  return o.ok();
}

bool decode_table_push(JsonObject& o, TablePush& m) {
  read_pushed_table(o.need("table"), m.table);
  if (JsonValue p = o.get("previous"); p.present() && !p.get()->is_null()) {
    m.previous.emplace();
    read_pushed_table(p, *m.previous);
  }
  return o.need("grace_ms").integer(m.grace_ms);
}

// Fills `out` from one parsed document; false with `error` set if it is not a valid message.
// Members a decoder does not know are ignored (UnknownKeys::kIgnore), so that nodes and config
// servers of different versions interoperate.
bool decode_object(const json::value& doc, Message& out, std::string& error) {
  JsonObject o = JsonObject::root(doc, "a message", UnknownKeys::kIgnore, error);
  std::string type;
  if (!o.need("type").string(type)) return false;
  Message m;
  if (type == "register") {
    decode_register(o, m.emplace<Register>());
  } else if (type == "heartbeat") {
    decode_heartbeat(o, m.emplace<Heartbeat>());
  } else if (type == "ack") {
    o.need("version").integer(m.emplace<Ack>().version);
  } else if (type == "purge_report") {
    decode_purge_report(o, m.emplace<PurgeReport>());
  } else if (type == "welcome") {
    Welcome& w = m.emplace<Welcome>();
    o.need("heartbeat_ms").integer(w.heartbeat_ms);
    o.need("config_version").integer(w.config_version);
  } else if (type == "table") {
    decode_table_push(o, m.emplace<TablePush>());
  } else if (type == "purge") {
    PurgeCommand& p = m.emplace<PurgeCommand>();
    o.need("action").choice(p.action, kPurgeActions, purge_action_name);
    o.need("age_s").integer(p.age_seconds);
    o.get("id").integer(p.id);
  } else if (type == "stream_report") {
    decode_stream_report(o, m.emplace<StreamReport>());
  } else if (type == "stream") {
    StreamCommand& c = m.emplace<StreamCommand>();
    o.need("action").choice(c.action, kStreamActions, stream_action_name);
    o.need("version").integer(c.version);
    read_names(o.get("lost"), c.lost);
  } else if (type == "fill") {
    o.need("filling").boolean(m.emplace<FillCommand>().filling);
  } else if (type == "refused") {
    Refused& r = m.emplace<Refused>();
    o.need("reason").string(r.reason);
    o.get("leader").string(r.leader);
  } else if (type == "auth_hello") {
    AuthHello& h = m.emplace<AuthHello>();
    o.need("role").choice(h.role, kRoles, imhash::to_string);
    o.need("name").string(h.name);
    o.need("nonce").string(h.nonce);
  } else if (type == "auth_challenge") {
    AuthChallenge& c = m.emplace<AuthChallenge>();
    o.need("nonce").string(c.nonce);
    o.need("proof").string(c.proof);
  } else if (type == "auth_proof") {
    o.need("proof").string(m.emplace<AuthProof>().proof);
  } else {
    error = "unknown message type " + quoted_value(type);
    return false;
  }
  if (!o.ok()) {
    error = type + ": " + error;
    return false;
  }
  out = std::move(m);
  return true;
}

}  // namespace

void append_message(const Message& m, std::vector<uint8_t>& out) { std::visit(Encoder{out}, m); }

DecodeStatus next_message(std::span<const uint8_t> in, Message& out, size_t& consumed,
                          std::string& error, uint32_t max_size) {
  consumed = 0;
  error.clear();  // the JSON readers below take a non-empty `error` for a failure already found
  if (in.size() < kLengthPrefixSize) return DecodeStatus::kNeedMore;
  const uint32_t length = bytes::get_u32(in.data());
  const uint32_t limit = std::min(max_size, kMaxMessageSize);
  if (length > limit) {
    error = "message of " + std::to_string(length) + " bytes; at most " + std::to_string(limit) +
            " are allowed";
    return DecodeStatus::kTooLarge;
  }
  if (in.size() - kLengthPrefixSize < length) return DecodeStatus::kNeedMore;
  consumed = kLengthPrefixSize + length;

  const std::string_view text(reinterpret_cast<const char*>(in.data() + kLengthPrefixSize), length);
  try {
    json::error_code ec;
    const json::value doc = json::parse(text, ec);
    if (ec) {
      error = "invalid JSON: " + ec.message();
      return DecodeStatus::kBadJson;
    }
    if (!decode_object(doc, out, error)) return DecodeStatus::kBadMessage;
  } catch (const std::exception& e) {  // allocation failure: nothing else throws here
    error = std::string("cannot decode the message: ") + e.what();
    return DecodeStatus::kBadMessage;
  }
  return DecodeStatus::kOk;
}

json::object purge_shard_json(const PurgeShard& s) {
  return json::object{{"shard", s.shard},
                      {"state", purge_state_name(s.state)},
                      {"kind", purge_action_name(s.kind)},
                      {"scanned", s.scanned},
                      {"total", s.total},
                      {"deleted", s.deleted},
                      {"id", s.id}};
}

json::object stream_report_json(const StreamReport& r) {
  json::array targets;
  for (const StreamTarget& t : r.targets) {
    targets.push_back(json::object{{"name", t.name}, {"records", t.records}});
  }
  json::object o{{"version", r.version},
                 {"state", stream_state_name(r.state)},
                 {"scanned", r.scanned},
                 {"total", r.total},
                 {"sent", r.sent},
                 {"rate", r.rate},
                 {"eta_ms", r.eta_ms},
                 {"restarts", r.restarts},
                 {"targets", std::move(targets)}};
  if (!r.lost.empty()) o["lost"] = json::array(r.lost.begin(), r.lost.end());
  return o;
}

const char* stream_state_name(StreamState s) {
  switch (s) {
    case StreamState::kIdle:
      return "idle";
    case StreamState::kRunning:
      return "running";
    case StreamState::kDone:
      return "done";
    case StreamState::kCancelled:
      return "cancelled";
  }
  return "?";
}

const char* stream_action_name(StreamAction a) {
  return a == StreamAction::kStart ? "start" : a == StreamAction::kCancel ? "cancel" : "?";
}

const char* to_string(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kNeedMore:
      return "need more bytes";
    case DecodeStatus::kTooLarge:
      return "message too large";
    case DecodeStatus::kBadJson:
      return "invalid JSON";
    case DecodeStatus::kBadMessage:
      return "invalid message";
  }
  return "?";
}

const char* purge_action_name(PurgeAction a) {
  switch (a) {
    case PurgeAction::kStatus:
      return "status";
    case PurgeAction::kNotOwned:
      return "not_owned";
    case PurgeAction::kOlderThan:
      return "older_than";
    case PurgeAction::kAll:
      return "all";
    case PurgeAction::kCancel:
      return "cancel";
  }
  return "?";
}

std::optional<PurgeAction> parse_purge_action(std::string_view text) {
  return parse_name(text, kPurgeActions, purge_action_name);
}

const char* purge_state_name(PurgeState s) {
  switch (s) {
    case PurgeState::kIdle:
      return "idle";
    case PurgeState::kRunning:
      return "running";
    case PurgeState::kDone:
      return "done";
    case PurgeState::kCancelled:
      return "cancelled";
  }
  return "?";
}

std::optional<PurgeState> parse_purge_state(std::string_view text) {
  return parse_name(text, kPurgeStates, purge_state_name);
}

const char* type_name(const Message& m) {
  static constexpr const char* kNames[] = {
      "register",   "heartbeat",     "ack",     "purge_report", "welcome",
      "table",      "purge",         "refused", "auth_hello",   "auth_challenge",
      "auth_proof", "stream_report", "stream",  "fill"};
  static_assert(std::size(kNames) == std::variant_size_v<Message>);
  return kNames[m.index()];
}

}  // namespace imhash::control
