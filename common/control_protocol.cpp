#include "common/control_protocol.h"

#include <boost/json.hpp>
#include <cmath>
#include <exception>
#include <iterator>
#include <limits>
#include <utility>

#include "common/bytes.h"
#include "common/table_json.h"

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
    append_frame(json::serialize(o), out);
  }
  void operator()(const Heartbeat& m) {
    json::object o;
    o["type"] = "heartbeat";
    o["version"] = m.version;
    o["stats"] = clean_stats(m.stats);
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
    for (const PurgeShard& s : m.shards) {
      shards.push_back(json::object{{"shard", s.shard},
                                    {"state", purge_state_name(s.state)},
                                    {"kind", purge_action_name(s.kind)},
                                    {"scanned", s.scanned},
                                    {"total", s.total},
                                    {"deleted", s.deleted}});
    }
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
    append_frame(json::serialize(o), out);
  }
};

// ---- decoding -----------------------------------------------------------------------------------

const char* kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "number";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "value";
}

// A value from the peer, quoted and cut short for an error message.
std::string shown(const json::value& v) {
  std::string text = json::serialize(v);
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  return text;
}

// Reads the members of one object; the first problem goes to `error`, naming the member as
// "TYPE: \"PREFIX.KEY\"".
class Fields {
 public:
  Fields(const json::object& object, std::string_view type, std::string prefix, std::string& error)
      : object_(object), type_(type), prefix_(std::move(prefix)), error_(error) {}

  std::string name(std::string_view key) const {
    return std::string(type_) + ": \"" + prefix_ + std::string(key) + "\"";
  }

  const json::value* need(std::string_view key) {
    const json::value* v = object_.if_contains(key);
    if (!v) error_ = name(key) + " is missing";
    return v;
  }

  bool u64(std::string_view key, uint64_t& out) {
    const json::value* v = need(key);
    if (!v) return false;
    if (v->is_uint64()) {
      out = v->get_uint64();
      return true;
    }
    if (v->is_int64() && v->get_int64() >= 0) {
      out = static_cast<uint64_t>(v->get_int64());
      return true;
    }
    if (v->is_number()) {
      error_ =
          name(key) + " must be an integer from 0 to 18446744073709551615 (got " + shown(*v) + ")";
    } else {
      error_ = name(key) + " must be an integer, not a " + kind_name(*v);
    }
    return false;
  }

  bool u32(std::string_view key, uint32_t& out) {
    uint64_t wide = 0;
    if (!u64(key, wide)) return false;
    if (wide > std::numeric_limits<uint32_t>::max()) {
      error_ = name(key) + " must be at most 4294967295 (got " + std::to_string(wide) + ")";
      return false;
    }
    out = static_cast<uint32_t>(wide);
    return true;
  }

  const json::string* string(std::string_view key) {
    const json::value* v = need(key);
    if (!v) return nullptr;
    if (!v->is_string()) error_ = name(key) + " must be a string, not a " + kind_name(*v);
    return v->if_string();
  }

  bool string(std::string_view key, std::string& out) {
    const json::string* s = string(key);
    if (s) out.assign(s->data(), s->size());
    return s != nullptr;
  }

  // A string member naming one value of an enum, read with `parse`.
  template <typename E, typename Parse>
  bool choice(std::string_view key, Parse parse, const char* choices, E& out) {
    const json::string* s = string(key);
    if (!s) return false;
    const std::optional<E> e = parse(std::string_view(s->data(), s->size()));
    if (!e) {
      error_ = name(key) + " must be " + choices + " (got " + shown(json::value(*s)) + ")";
      return false;
    }
    out = *e;
    return true;
  }

  std::string& error() { return error_; }

 private:
  const json::object& object_;
  std::string_view type_;
  std::string prefix_;
  std::string& error_;
};

bool read_table(const json::value& v, Fields& f, std::string_view key, Table& out) {
  if (!v.is_object()) {
    f.error() = f.name(key) + " must be an object, not a " + kind_name(v);
    return false;
  }
  TableResult r = parse_table_json(json::serialize(v));
  if (!r.ok()) {
    f.error() = f.name(key) + " is not a valid table: " + r.error;
    return false;
  }
  out = std::move(*r.table);
  return true;
}

bool decode_register(Fields& f, Register& m) {
  return f.choice("role", parse_role, R"("hash" or "login")", m.role) && f.string("name", m.name) &&
         f.string("address", m.address) && f.u32("shards", m.shards) &&
         f.u64("version", m.version) && f.u64("pid", m.pid);
}

bool decode_heartbeat(Fields& f, Heartbeat& m) {
  if (!f.u64("version", m.version)) return false;
  const json::value* v = f.need("stats");
  if (!v) return false;
  if (!v->is_object()) {
    f.error() = f.name("stats") + " must be an object, not a " + kind_name(*v);
    return false;
  }
  for (const auto& [key, value] : v->get_object()) {
    const std::string field = "stats." + std::string(key.data(), key.size());
    if (!value.is_number()) {
      f.error() = f.name(field) + " must be a number, not a " + kind_name(value);
      return false;
    }
    if (value.is_double() && !std::isfinite(value.get_double())) {
      f.error() = f.name(field) + " is out of range";
      return false;
    }
  }
  m.stats = v->get_object();
  return true;
}

bool decode_purge_report(Fields& f, PurgeReport& m) {
  const json::value* v = f.need("shards");
  if (!v) return false;
  if (!v->is_array()) {
    f.error() = f.name("shards") + " must be an array, not a " + kind_name(*v);
    return false;
  }
  const json::array& shards = v->get_array();
  m.shards.reserve(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string where = "shards[" + std::to_string(i) + "]";
    if (!shards[i].is_object()) {
      f.error() = f.name(where) + " must be an object, not a " + kind_name(shards[i]);
      return false;
    }
    Fields s(shards[i].get_object(), "purge_report", where + ".", f.error());
    PurgeShard p;
    if (!s.u32("shard", p.shard) ||
        !s.choice("state", parse_purge_state, R"("idle", "running", "done" or "cancelled")",
                  p.state) ||
        !s.choice("kind", parse_purge_action,
                  R"("status", "not_owned", "older_than", "all" or "cancel")", p.kind) ||
        !s.u64("scanned", p.scanned) || !s.u64("total", p.total) || !s.u64("deleted", p.deleted)) {
      return false;
    }
    m.shards.push_back(p);
  }
  return true;
}

bool decode_table_push(Fields& f, const json::object& o, TablePush& m) {
  const json::value* t = f.need("table");
  if (!t || !read_table(*t, f, "table", m.table)) return false;
  if (const json::value* p = o.if_contains("previous"); p && !p->is_null()) {
    Table previous;
    if (!read_table(*p, f, "previous", previous)) return false;
    m.previous = std::move(previous);
  }
  return f.u64("grace_ms", m.grace_ms);
}

bool decode_purge(Fields& f, PurgeCommand& m) {
  return f.choice("action", parse_purge_action,
                  R"("status", "not_owned", "older_than", "all" or "cancel")", m.action) &&
         f.u32("age_s", m.age_seconds);
}

// Fills `out` from one parsed document; false with `error` set if it is not a valid message.
bool decode_object(const json::value& doc, Message& out, std::string& error) {
  const json::object* o = doc.if_object();
  if (!o) {
    error = std::string("a message must be a JSON object, not a ") + kind_name(doc);
    return false;
  }
  const json::value* t = o->if_contains("type");
  if (!t || !t->is_string()) {
    error = t ? std::string("\"type\" must be a string, not a ") + kind_name(*t)
              : std::string("\"type\" is missing");
    return false;
  }
  const std::string_view type(t->get_string().data(), t->get_string().size());
  Fields f(*o, type, "", error);
  if (type == "register") {
    Register m;
    if (!decode_register(f, m)) return false;
    out = std::move(m);
  } else if (type == "heartbeat") {
    Heartbeat m;
    if (!decode_heartbeat(f, m)) return false;
    out = std::move(m);
  } else if (type == "ack") {
    Ack m;
    if (!f.u64("version", m.version)) return false;
    out = m;
  } else if (type == "purge_report") {
    PurgeReport m;
    if (!decode_purge_report(f, m)) return false;
    out = std::move(m);
  } else if (type == "welcome") {
    Welcome m;
    if (!f.u32("heartbeat_ms", m.heartbeat_ms) || !f.u64("config_version", m.config_version)) {
      return false;
    }
    out = m;
  } else if (type == "table") {
    TablePush m;
    if (!decode_table_push(f, *o, m)) return false;
    out = std::move(m);
  } else if (type == "purge") {
    PurgeCommand m;
    if (!decode_purge(f, m)) return false;
    out = m;
  } else {
    error = "unknown message type " + shown(*t);
    return false;
  }
  return true;
}

}  // namespace

void append_message(const Message& m, std::vector<uint8_t>& out) { std::visit(Encoder{out}, m); }

DecodeStatus next_message(std::span<const uint8_t> in, Message& out, size_t& consumed,
                          std::string& error) {
  consumed = 0;
  if (in.size() < kLengthPrefixSize) return DecodeStatus::kNeedMore;
  const uint32_t length = bytes::get_u32(in.data());
  if (length > kMaxMessageSize) {
    error = "message of " + std::to_string(length) + " bytes; at most " +
            std::to_string(kMaxMessageSize) + " are allowed";
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

const char* to_string(Role r) {
  switch (r) {
    case Role::kHash:
      return "hash";
    case Role::kLogin:
      return "login";
  }
  return "?";
}

std::optional<Role> parse_role(std::string_view text) {
  if (text == "hash") return Role::kHash;
  if (text == "login") return Role::kLogin;
  return std::nullopt;
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
  for (PurgeAction a : {PurgeAction::kStatus, PurgeAction::kNotOwned, PurgeAction::kOlderThan,
                        PurgeAction::kAll, PurgeAction::kCancel}) {
    if (text == purge_action_name(a)) return a;
  }
  return std::nullopt;
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
  for (PurgeState s :
       {PurgeState::kIdle, PurgeState::kRunning, PurgeState::kDone, PurgeState::kCancelled}) {
    if (text == purge_state_name(s)) return s;
  }
  return std::nullopt;
}

const char* type_name(const Message& m) {
  static constexpr const char* kNames[] = {"register", "heartbeat", "ack",  "purge_report",
                                           "welcome",  "table",     "purge"};
  static_assert(std::size(kNames) == std::variant_size_v<Message>);
  return kNames[m.index()];
}

}  // namespace imhash::control
