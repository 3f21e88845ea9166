#include "common/codec/frame_protocol.h"

#include <algorithm>

#include "common/codec/bytes.h"

namespace imhash::frame {
namespace {

using bytes::Appender;
using bytes::Reader;

bool known_type(uint8_t t) {
  return t >= static_cast<uint8_t>(FrameType::kHello) &&
         t <= static_cast<uint8_t>(FrameType::kImport);
}

void put_endpoint(Appender& a, const Endpoint& e) {
  a.u8(e.family);
  a.u16(e.port);
  a.raw(e.addr.data(), e.addr_len());
}

bool get_endpoint(Reader& r, Endpoint& e) {
  e = Endpoint{};
  e.family = r.u8();
  e.port = r.u16();
  if (e.family != 4 && e.family != 6) return false;
  const uint8_t* a = r.raw(e.addr_len());
  if (!a) return false;
  std::copy(a, a + e.addr_len(), e.addr.begin());
  return true;
}

void put_name(Appender& a, std::string_view name) {
  const size_t n = std::min(name.size(), kMaxNameLength);
  a.u8(static_cast<uint8_t>(n));
  a.raw(reinterpret_cast<const uint8_t*>(name.data()), n);
}

std::string_view get_bytes(Reader& r, size_t n) {
  const uint8_t* p = r.raw(n);
  return p ? std::string_view(reinterpret_cast<const char*>(p), n) : std::string_view{};
}

void put_bytes(Appender& a, std::string_view b) {
  a.raw(reinterpret_cast<const uint8_t*>(b.data()), b.size());
}

std::string_view get_name(Reader& r) {
  const uint8_t n = r.u8();
  const uint8_t* p = r.raw(n);
  return p ? std::string_view(reinterpret_cast<const char*>(p), n) : std::string_view{};
}

// Writes the header with a placeholder length; returns where the frame starts.
size_t begin_frame(Appender& a, FrameType type, uint8_t status, uint8_t flags, uint32_t correlation,
                   uint64_t table_version) {
  const size_t start = a.size();
  a.u32(0);
  a.u8(static_cast<uint8_t>(type));
  a.u8(status);
  a.u8(flags);
  a.u8(0);
  a.u32(correlation);
  a.u64(table_version);
  return start;
}

void end_frame(Appender& a, size_t start) {
  a.patch_u32(start, static_cast<uint32_t>(a.size() - start - 4));
}

// A body must be consumed exactly: trailing bytes mean the peer and we disagree on the layout.
DecodeStatus finish(const Reader& r) {
  return r.ok() && r.left() == 0 ? DecodeStatus::kOk : DecodeStatus::kBadBody;
}

}  // namespace

const char* to_string(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk:
      return "ok";
    case DecodeStatus::kNeedMore:
      return "need more bytes";
    case DecodeStatus::kTooLarge:
      return "frame too large";
    case DecodeStatus::kTooSmall:
      return "frame shorter than its header";
    case DecodeStatus::kBadType:
      return "unknown frame type";
    case DecodeStatus::kBadBody:
      return "malformed body";
    case DecodeStatus::kBadReserved:
      return "reserved byte not zero";
  }
  return "?";
}

const char* to_string(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kUpsert:
      return "UPSERT";
    case FrameType::kGet:
      return "GET";
    case FrameType::kDelete:
      return "DELETE";
    case FrameType::kStats:
      return "STATS";
    case FrameType::kPurge:
      return "PURGE";
    case FrameType::kPing:
      return "PING";
    case FrameType::kAuth:
      return "AUTH";
    case FrameType::kImport:
      return "IMPORT";
  }
  return "?";
}

const char* to_string(FrameStatus s) {
  switch (s) {
    case FrameStatus::kOk:
      return "OK";
    case FrameStatus::kNotFound:
      return "NOT_FOUND";
    case FrameStatus::kMoved:
      return "MOVED";
    case FrameStatus::kBadRequest:
      return "BAD_REQUEST";
    case FrameStatus::kWrongShard:
      return "WRONG_SHARD";
    case FrameStatus::kUnsupported:
      return "UNSUPPORTED";
    case FrameStatus::kUnauthorized:
      return "UNAUTHORIZED";
    case FrameStatus::kNotReady:
      return "NOT_READY";
  }
  return "?";
}

DecodeStatus next_frame(std::span<const uint8_t> in, Header& header, std::span<const uint8_t>& body,
                        size_t& consumed) {
  consumed = 0;
  if (in.size() < 4) return DecodeStatus::kNeedMore;
  const uint32_t length = bytes::get_u32(in.data());
  // Judge the length before waiting for the rest: a hostile length must not make us buffer 4 GiB.
  if (length > kMaxFrameLength) return DecodeStatus::kTooLarge;
  if (length < kHeaderSize - 4) return DecodeStatus::kTooSmall;
  if (in.size() < 4 + size_t{length}) {
    // The header alone can already be judged; reject garbage early.
    if (in.size() >= 5 && !known_type(in[4])) return DecodeStatus::kBadType;
    return DecodeStatus::kNeedMore;
  }
  const uint8_t* p = in.data();
  if (!known_type(p[4])) return DecodeStatus::kBadType;
  if (p[7] != 0) return DecodeStatus::kBadReserved;
  header.length = length;
  header.type = static_cast<FrameType>(p[4]);
  header.status = p[5];
  header.flags = p[6];
  header.correlation = bytes::get_u32(p + 8);
  header.table_version = bytes::get_u64(p + 12);
  body = in.subspan(kHeaderSize, header.body_size());
  consumed = 4 + size_t{length};
  return DecodeStatus::kOk;
}

DecodeStatus decode_request(const Header& h, std::span<const uint8_t> body, Request& out) {
  // Field by field rather than `out = Request{}`, for which GCC 12 emits a `rep stos` over the
  // whole struct: its start-up cost made decoding a GET a third dearer (22 against 17 ns a frame,
  // on the hash server's path for every request). A field added to Request is reset here too.
  static_assert(sizeof(Request) == 120, "reset the new field of Request below");
  out.type = h.type;
  out.flags = h.flags;
  out.correlation = h.correlation;
  out.table_version = h.table_version;
  out.id = 0;
  out.endpoint = Endpoint{};
  out.age_seconds = 0;
  out.protocol_version = 0;
  out.shard = 0;
  out.name = {};
  out.role = Role::kLogin;
  out.auth = {};
  out.purge = PurgeAction::kStatus;
  out.record_count = 0;
  out.records = {};
  if (h.status != 0) return DecodeStatus::kBadBody;
  Reader r(body.data(), body.size());
  switch (h.type) {
    case FrameType::kHello:
      out.protocol_version = r.u16();
      out.shard = r.u16();
      out.name = get_name(r);
      if (h.flags & kFlagAuth) {
        const uint8_t role = r.u8();
        if (role != static_cast<uint8_t>(Role::kLogin) &&
            role != static_cast<uint8_t>(Role::kHash)) {
          return DecodeStatus::kBadBody;
        }
        out.role = static_cast<Role>(role);
        out.auth = get_bytes(r, kHelloAuthRequestSize - 1);
      }
      break;
    case FrameType::kAuth:
      out.auth = get_bytes(r, kAuthRequestSize);
      break;
    case FrameType::kUpsert:
      out.id = r.u64();
      out.age_seconds = r.u32();
      if (!get_endpoint(r, out.endpoint)) return DecodeStatus::kBadBody;
      break;
    case FrameType::kGet:
      out.id = r.u64();
      break;
    case FrameType::kDelete:
      out.id = r.u64();
      if (h.flags & kFlagTimed) out.age_seconds = r.u32();
      break;
    case FrameType::kPurge: {
      const uint8_t action = r.u8();
      if (action > static_cast<uint8_t>(PurgeAction::kCancel)) return DecodeStatus::kBadBody;
      out.purge = static_cast<PurgeAction>(action);
      out.age_seconds = r.u32();
      break;
    }
    case FrameType::kImport: {
      out.record_count = r.u16();
      if (out.record_count > kMaxImportRecords) return DecodeStatus::kBadBody;
      const size_t start = body.size() - r.left();
      for (uint16_t i = 0; i < out.record_count && r.ok(); ++i) {
        r.u64();
        r.u32();
        Endpoint e;
        if (!get_endpoint(r, e)) return DecodeStatus::kBadBody;
      }
      if (!r.ok()) return DecodeStatus::kBadBody;
      out.records = std::string_view(reinterpret_cast<const char*>(body.data()) + start,
                                     body.size() - r.left() - start);
      break;
    }
    case FrameType::kStats:
    case FrameType::kPing:
      break;
  }
  return finish(r);
}

void append_import_record(const ImportRecord& record, std::vector<uint8_t>& records) {
  Appender a(records);
  a.u64(record.id);
  a.u32(record.age_seconds);
  put_endpoint(a, record.endpoint);
}

bool next_import_record(std::string_view& records, ImportRecord& out) {
  Reader r(reinterpret_cast<const uint8_t*>(records.data()), records.size());
  if (records.empty()) return false;
  out.id = r.u64();
  out.age_seconds = r.u32();
  if (!get_endpoint(r, out.endpoint) || !r.ok()) {
    records = {};
    return false;
  }
  records.remove_prefix(records.size() - r.left());
  return true;
}

void import_records_to_ages(std::span<uint8_t> records, uint32_t now_s) {
  std::string_view rest(reinterpret_cast<const char*>(records.data()), records.size());
  ImportRecord rec;
  for (;;) {
    const size_t at = records.size() - rest.size();
    if (!next_import_record(rest, rec)) return;
    bytes::put_u32(records.data() + at + sizeof(uint64_t),
                   now_s >= rec.age_seconds ? now_s - rec.age_seconds : 0);
  }
}

Request untimed(const Request& q, uint64_t now_unix_ms, std::vector<uint8_t>& scratch) {
  if (!(q.flags & kFlagTimed)) return q;
  Request out = q;
  out.flags = static_cast<uint8_t>(q.flags & ~kFlagTimed);
  if (q.type == FrameType::kImport) {
    scratch.assign(q.records.begin(), q.records.end());
    import_records_to_ages(scratch, static_cast<uint32_t>(now_unix_ms / 1000));
    out.records = std::string_view(reinterpret_cast<const char*>(scratch.data()), scratch.size());
    return out;
  }
  if (q.type != FrameType::kUpsert && q.type != FrameType::kDelete) return q;
  // The low 32 bits of both times: their difference is right for writes under 49 days old.
  const uint32_t since = static_cast<uint32_t>(now_unix_ms) - q.age_seconds;
  const uint32_t age_ms = since < 0x8000'0000u ? since : 0;  // made "later": clocks apart
  out.age_seconds = q.type == FrameType::kUpsert ? age_ms / 1000 : 0;
  return out;
}

std::optional<uint64_t> peek_request_id(const Header& h, std::span<const uint8_t> body) {
  if (!is_keyed(h.type) || body.size() < sizeof(uint64_t)) return std::nullopt;
  return bytes::get_u64(body.data());  // the id leads each of these bodies (see decode_request)
}

DecodeStatus decode_response(const Header& h, std::span<const uint8_t> body, Response& out) {
  out = Response{};
  out.type = h.type;
  out.correlation = h.correlation;
  out.table_version = h.table_version;
  if (h.status > static_cast<uint8_t>(FrameStatus::kNotReady)) return DecodeStatus::kBadBody;
  out.status = static_cast<FrameStatus>(h.status);
  out.flags = h.flags;
  Reader r(body.data(), body.size());
  // Only OK responses carry a body.
  if (out.status != FrameStatus::kOk) return finish(r);
  switch (h.type) {
    case FrameType::kHello:
      out.protocol_version = r.u16();
      out.shard_count = r.u16();
      out.name = get_name(r);
      if (h.flags & kFlagAuth) out.auth = get_bytes(r, kHelloAuthResponseSize);
      break;
    case FrameType::kGet:
      if (!get_endpoint(r, out.endpoint)) return DecodeStatus::kBadBody;
      out.age_seconds = r.u32();
      break;
    case FrameType::kStats: {
      const uint8_t n = r.u8();
      out.stat_count = std::min<uint8_t>(n, kStatCount);
      for (uint8_t i = 0; i < n; ++i) {
        const uint64_t v = r.u64();
        if (i < kStatCount) out.stats[i] = v;
      }
      break;
    }
    case FrameType::kPurge: {
      const uint8_t state = r.u8();
      const uint8_t kind = r.u8();
      if (state > static_cast<uint8_t>(PurgeState::kCancelled) ||
          kind > static_cast<uint8_t>(PurgeAction::kCancel)) {
        return DecodeStatus::kBadBody;
      }
      out.purge.state = static_cast<PurgeState>(state);
      out.purge.kind = static_cast<PurgeAction>(kind);
      out.purge.scanned = r.u64();
      out.purge.total = r.u64();
      out.purge.deleted = r.u64();
      break;
    }
    case FrameType::kUpsert:
    case FrameType::kDelete:
    case FrameType::kPing:
    case FrameType::kAuth:
    case FrameType::kImport:
      break;
  }
  return finish(r);
}

void append_request(const Request& q, std::vector<uint8_t>& out) {
  Appender a(out);
  const size_t start = begin_frame(a, q.type, 0, q.flags, q.correlation, q.table_version);
  switch (q.type) {
    case FrameType::kHello:
      a.u16(q.protocol_version);
      a.u16(q.shard);
      put_name(a, q.name);
      if (q.flags & kFlagAuth) {
        a.u8(static_cast<uint8_t>(q.role));
        put_bytes(a, q.auth);
      }
      break;
    case FrameType::kAuth:
      put_bytes(a, q.auth);
      break;
    case FrameType::kUpsert:
      a.u64(q.id);
      a.u32(q.age_seconds);
      put_endpoint(a, q.endpoint);
      break;
    case FrameType::kGet:
      a.u64(q.id);
      break;
    case FrameType::kDelete:
      a.u64(q.id);
      if (q.flags & kFlagTimed) a.u32(q.age_seconds);
      break;
    case FrameType::kPurge:
      a.u8(static_cast<uint8_t>(q.purge));
      a.u32(q.age_seconds);
      break;
    case FrameType::kImport:
      a.u16(q.record_count);
      put_bytes(a, q.records);
      break;
    case FrameType::kStats:
    case FrameType::kPing:
      break;
  }
  end_frame(a, start);
}

void append_response(const Response& s, std::vector<uint8_t>& out) {
  Appender a(out);
  const size_t start = begin_frame(a, s.type, static_cast<uint8_t>(s.status), s.flags,
                                   s.correlation, s.table_version);
  if (s.status == FrameStatus::kOk) {
    switch (s.type) {
      case FrameType::kHello:
        a.u16(s.protocol_version);
        a.u16(s.shard_count);
        put_name(a, s.name);
        if (s.flags & kFlagAuth) put_bytes(a, s.auth);
        break;
      case FrameType::kGet:
        put_endpoint(a, s.endpoint);
        a.u32(s.age_seconds);
        break;
      case FrameType::kStats:
        a.u8(std::min<uint8_t>(s.stat_count, kStatCount));
        for (uint8_t i = 0; i < std::min<uint8_t>(s.stat_count, kStatCount); ++i) a.u64(s.stats[i]);
        break;
      case FrameType::kPurge:
        a.u8(static_cast<uint8_t>(s.purge.state));
        a.u8(static_cast<uint8_t>(s.purge.kind));
        a.u64(s.purge.scanned);
        a.u64(s.purge.total);
        a.u64(s.purge.deleted);
        break;
      case FrameType::kUpsert:
      case FrameType::kDelete:
      case FrameType::kPing:
      case FrameType::kAuth:
      case FrameType::kImport:
        break;
    }
  }
  end_frame(a, start);
}

}  // namespace imhash::frame
