#include "config_server/etcd_client.h"

#include <openssl/evp.h>

#include <boost/json.hpp>
#include <charconv>

#include "common/endpoint.h"
#include "config_server/imctl_http.h"

namespace json = boost::json;

namespace imhash {

namespace {

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// false for text that is not base64 (etcd never sends such).
bool unbase64(std::string_view text, std::string& out) {
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
    if (!unbase64(string_field(*kv, "key"), r.key) ||
        !unbase64(string_field(*kv, "value"), r.value)) {
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
  json::object o{{"key", base64(key)}};
  if (prefix) o["range_end"] = base64(etcd_prefix_end(key));
  return o;
}

json::object op_json(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      json::object put{{"key", base64(op.key)}, {"value", base64(op.value)}};
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
  json::object o{{"key", base64(c.key)}, {"result", "EQUAL"}};
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
      o["value"] = base64(c.value);
      break;
  }
  return o;
}

int64_t header_revision(const json::object& o) {
  const json::value* h = o.if_contains("header");
  return h && h->is_object() ? int_field(h->get_object(), "revision") : 0;
}

}  // namespace

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

EtcdClient::EtcdClient(std::vector<HostPort> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {
  if (endpoints_.empty()) throw UsageError("an etcd store needs at least one HOST:PORT");
}

std::string EtcdClient::describe() const {
  std::string out;
  for (const HostPort& e : endpoints_) {
    if (!out.empty()) out += ",";
    out += format_host_port(e.host, e.port);
  }
  return out;
}

EtcdReply EtcdClient::post(const char* path, const json::value& body, json::value& reply) {
  const auto start = std::chrono::steady_clock::now();
  const std::string text = json::serialize(body);
  std::string errors;
  EtcdReply out;
  bool answered = false;
  for (size_t tried = 0; tried < endpoints_.size() && !answered; ++tried) {
    const size_t at = (current_ + tried) % endpoints_.size();
    const HostPort& e = endpoints_[at];
    const HttpOutcome o =
        http_exchange(e.host, e.port, boost::beast::http::verb::post, path, text, timeout_);
    std::string why;
    if (o.failure != HttpFailure::kNone) {
      why = o.failure == HttpFailure::kTimeout
                ? "no answer within " + std::to_string(timeout_.count()) + " ms"
                : o.error;
    } else {
      boost::system::error_code ec;
      reply = json::parse(o.reply.body, ec);
      const json::object* obj = ec ? nullptr : reply.if_object();
      if (!obj) {
        why = "HTTP " + std::to_string(o.reply.status) + ", not a JSON object";
      } else if (o.reply.status != 200) {
        why = string_field(*obj, "error");
        if (why.empty()) why = "HTTP " + std::to_string(o.reply.status);
        // A 4xx is the request's fault: another member would answer the same.
        if (o.reply.status < 500) {
          current_ = at;
          out.error = "etcd " + format_host_port(e.host, e.port) + ": " + why;
          answered = true;
          break;
        }
      } else {
        current_ = at;
        answered = true;
        break;
      }
    }
    if (!errors.empty()) errors += "; ";
    errors += format_host_port(e.host, e.port) + ": " + why;
  }
  if (!answered) out.error = "etcd unreachable (" + errors + ")";
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++stats_.requests;
  if (!out.ok()) ++stats_.failures;
  stats_.last_ms = ms;
  stats_.total_ms += ms;
  return out;
}

EtcdReply EtcdClient::get(const std::string& key, bool prefix) {
  json::value reply;
  EtcdReply out = post("/v3/kv/range", key_range(key, prefix), reply);
  if (!out.ok()) return out;
  const json::object& o = reply.get_object();
  out.revision = header_revision(o);
  out.ranges.emplace_back();
  if (!read_kvs(o, out.ranges.back())) out.error = "etcd: unreadable range reply";
  return out;
}

EtcdReply EtcdClient::txn(const std::vector<EtcdCompare>& compare,
                          const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure) {
  json::array c, s, f;
  for (const EtcdCompare& x : compare) c.push_back(compare_json(x));
  for (const EtcdOp& x : success) s.push_back(op_json(x));
  for (const EtcdOp& x : failure) f.push_back(op_json(x));
  json::value reply;
  EtcdReply out = post(
      "/v3/kv/txn",
      json::object{{"compare", std::move(c)}, {"success", std::move(s)}, {"failure", std::move(f)}},
      reply);
  if (!out.ok()) return out;
  const json::object& o = reply.get_object();
  out.revision = header_revision(o);
  const json::value* ok = o.if_contains("succeeded");
  out.succeeded = ok && ok->is_bool() && ok->get_bool();
  if (const json::value* responses = o.if_contains("responses"); responses) {
    if (!responses->is_array()) {
      out.error = "etcd: unreadable txn reply";
      return out;
    }
    for (const json::value& r : responses->get_array()) {
      const json::object* ro = r.if_object();
      const json::value* range = ro ? ro->if_contains("response_range") : nullptr;
      if (!range) continue;
      out.ranges.emplace_back();
      if (!range->is_object() || !read_kvs(range->get_object(), out.ranges.back())) {
        out.error = "etcd: unreadable txn reply";
        return out;
      }
    }
  }
  return out;
}

EtcdReply EtcdClient::grant(int64_t ttl_s) {
  json::value reply;
  EtcdReply out = post("/v3/lease/grant", json::object{{"TTL", std::to_string(ttl_s)}}, reply);
  if (!out.ok()) return out;
  const json::object& o = reply.get_object();
  out.revision = header_revision(o);
  out.lease_id = int_field(o, "ID");
  out.ttl_s = int_field(o, "TTL");
  if (out.lease_id == 0) out.error = "etcd granted no lease: " + string_field(o, "error");
  return out;
}

EtcdReply EtcdClient::keepalive(int64_t lease_id) {
  json::value reply;
  EtcdReply out =
      post("/v3/lease/keepalive", json::object{{"ID", std::to_string(lease_id)}}, reply);
  if (!out.ok()) return out;
  // A stream of one answer: {"result": {"header", "ID", "TTL"}}; no TTL: the lease is gone.
  const json::value* result = reply.get_object().if_contains("result");
  if (!result || !result->is_object()) {
    out.error = "etcd: unreadable keepalive reply";
    return out;
  }
  out.lease_id = int_field(result->get_object(), "ID");
  out.ttl_s = int_field(result->get_object(), "TTL");
  return out;
}

EtcdReply EtcdClient::revoke(int64_t lease_id) {
  json::value reply;
  return post("/v3/lease/revoke", json::object{{"ID", std::to_string(lease_id)}}, reply);
}

}  // namespace imhash
