#include "config_server/etcd_codec.h"

#include <openssl/evp.h>

#include <boost/json.hpp>
#include <charconv>

namespace json = boost::json;

namespace imhash {

namespace {

std::string base64_of(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// false for text that is not base64 (etcd never sends such).
bool from_base64(std::string_view text, std::string& out) {
  if (text.size() % 4 != 0) return false;
  out.assign(3 * (text.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t len = static_cast<size_t>(n);
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() > 1 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return true;
}

// An int64 field: a JSON string of decimal digits (the gateway's encoding of int64), or a number;
// absent is 0.
int64_t int_field(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  if (!v) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
  if (!v->is_string()) return 0;
  const json::string& s = v->get_string();
  int64_t n = 0;
  std::from_chars(s.data(), s.data() + s.size(), n);
  return n;
}

std::string string_field(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

bool read_kvs(const json::object& range, std::vector<EtcdKv>& out) {
  const json::value* kvs = range.if_contains("kvs");
  if (!kvs) return true;  // none matched
  if (!kvs->is_array()) return false;
  for (const json::value& e : kvs->get_array()) {
    const json::object* kv = e.if_object();
    if (!kv) return false;
    EtcdKv r;
    if (!from_base64(string_field(*kv, "key"), r.key) ||
        !from_base64(string_field(*kv, "value"), r.value)) {
      return false;
    }
    r.create_revision = int_field(*kv, "create_revision");
    r.mod_revision = int_field(*kv, "mod_revision");
    r.version = int_field(*kv, "version");
    r.lease = int_field(*kv, "lease");
    out.push_back(std::move(r));
  }
  return true;
}

json::object key_range(const std::string& key, bool prefix) {
  json::object o{{"key", base64_of(key)}};
  if (prefix) o["range_end"] = base64_of(etcd_prefix_end(key));
  return o;
}

json::object op_json(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      json::object put{{"key", base64_of(op.key)}, {"value", base64_of(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return json::object{{"request_put", std::move(put)}};
    }
    case EtcdOp::Kind::kDelete:
      return json::object{{"request_delete_range", key_range(op.key, op.prefix)}};
    case EtcdOp::Kind::kRange:
      break;
  }
  return json::object{{"request_range", key_range(op.key, op.prefix)}};
}

json::object compare_json(const EtcdCompare& c) {
  json::object o{{"key", base64_of(c.key)}, {"result", "EQUAL"}};
  switch (c.target) {
    case EtcdCompare::Target::kCreate:
      o["target"] = "CREATE";
      o["create_revision"] = std::to_string(c.revision);
      break;
    case EtcdCompare::Target::kMod:
      o["target"] = "MOD";
      o["mod_revision"] = std::to_string(c.revision);
      break;
    case EtcdCompare::Target::kValue:
      o["target"] = "VALUE";
      o["value"] = base64_of(c.value);
      break;
  }
  return o;
}

int64_t header_revision(const json::object& o) {
  const json::value* h = o.if_contains("header");
  return h && h->is_object() ? int_field(h->get_object(), "revision") : 0;
}

}  // namespace

std::string etcd_base64(std::string_view bytes) { return base64_of(bytes); }
bool etcd_unbase64(std::string_view text, std::string& out) { return from_base64(text, out); }

json::object etcd_range_request(const std::string& key, bool prefix) {
  return key_range(key, prefix);
}

json::object etcd_txn_request(const std::vector<EtcdCompare>& compare,
                              const std::vector<EtcdOp>& success,
                              const std::vector<EtcdOp>& failure) {
  json::array c, s, f;
  for (const EtcdCompare& x : compare) c.push_back(compare_json(x));
  for (const EtcdOp& x : success) s.push_back(op_json(x));
  for (const EtcdOp& x : failure) f.push_back(op_json(x));
  return json::object{
      {"compare", std::move(c)}, {"success", std::move(s)}, {"failure", std::move(f)}};
}

std::string etcd_error_text(const json::value& reply) {
  const json::object* o = reply.if_object();
  return o ? string_field(*o, "error") : std::string();
}

void read_range_reply(const json::value& reply, EtcdReply& out) {
  const json::object* o = reply.if_object();
  if (!o) {
    out.error = "etcd: unreadable range reply";
    return;
  }
  out.revision = header_revision(*o);
  out.ranges.emplace_back();
  if (!read_kvs(*o, out.ranges.back())) out.error = "etcd: unreadable range reply";
}

void read_txn_reply(const json::value& reply, EtcdReply& out) {
  const json::object* o = reply.if_object();
  if (!o) {
    out.error = "etcd: unreadable txn reply";
    return;
  }
  out.revision = header_revision(*o);
  const json::value* ok = o->if_contains("succeeded");
  out.succeeded = ok && ok->is_bool() && ok->get_bool();
  const json::value* responses = o->if_contains("responses");
  if (!responses) return;
  if (!responses->is_array()) {
    out.error = "etcd: unreadable txn reply";
    return;
  }
  for (const json::value& r : responses->get_array()) {
    const json::object* ro = r.if_object();
    const json::value* range = ro ? ro->if_contains("response_range") : nullptr;
    if (!range) continue;
    out.ranges.emplace_back();
    if (!range->is_object() || !read_kvs(range->get_object(), out.ranges.back())) {
      out.error = "etcd: unreadable txn reply";
      return;
    }
  }
}

void read_grant_reply(const json::value& reply, EtcdReply& out) {
  const json::object* o = reply.if_object();
  if (!o) {
    out.error = "etcd: unreadable lease grant reply";
    return;
  }
  out.revision = header_revision(*o);
  out.lease_id = int_field(*o, "ID");
  out.ttl_s = int_field(*o, "TTL");
  if (out.lease_id == 0) out.error = "etcd granted no lease: " + string_field(*o, "error");
}

void read_keepalive_reply(const json::value& reply, EtcdReply& out) {
  // A stream of one answer: {"result": {"header", "ID", "TTL"}}; no TTL: the lease is gone.
  const json::object* o = reply.if_object();
  const json::value* result = o ? o->if_contains("result") : nullptr;
  if (!result || !result->is_object()) {
    out.error = "etcd: unreadable keepalive reply";
    return;
  }
  out.lease_id = int_field(result->get_object(), "ID");
  out.ttl_s = int_field(result->get_object(), "TTL");
}

std::string etcd_prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace imhash
