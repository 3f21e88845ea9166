#include "config_server/etcd_client.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>

#include "common/codec/endpoint.h"
#include "common/links/http_client.h"

namespace json = boost::json;

namespace imhash {

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

EtcdReply EtcdClient::post(const char* path, const json::value& body, json::value& reply,
                           std::chrono::milliseconds timeout, Deadline until) {
  const auto start = std::chrono::steady_clock::now();
  const std::string text = json::serialize(body);
  std::string errors;
  EtcdReply out;
  bool answered = false;
  for (size_t tried = 0; tried < endpoints_.size() && !answered; ++tried) {
    const size_t at = (current_ + tried) % endpoints_.size();
    const HostPort& e = endpoints_[at];
    std::chrono::milliseconds wait = timeout;
    if (until != Deadline::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        if (!errors.empty()) errors += "; ";
        errors += "out of time before " + format_host_port(e.host, e.port);
        break;
      }
      wait = std::min(wait, left);
    }
    const HttpOutcome o =
        http_exchange(e.host, e.port, boost::beast::http::verb::post, path, text, wait);
    std::string why;
    if (o.failure != HttpFailure::kNone) {
      why = o.failure == HttpFailure::kTimeout
                ? "no answer within " + std::to_string(wait.count()) + " ms"
                : o.error;
    } else {
      boost::system::error_code ec;
      reply = json::parse(o.reply.body, ec);
      const json::object* obj = ec ? nullptr : reply.if_object();
      if (!obj) {
        why = "HTTP " + std::to_string(o.reply.status) + ", not a JSON object";
      } else if (o.reply.status != 200) {
        why = etcd_error_text(reply);
        if (why.empty()) why = "HTTP " + std::to_string(o.reply.status);
        // A 4xx is the request's fault: another member would answer the same.
        if (o.reply.status < 500) {
          current_ = at;
          out.error = "etcd " + format_host_port(e.host, e.port) + ": " + why;
          out.refused = true;
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
  EtcdReply out = post("/v3/kv/range", etcd_range_request(key, prefix), reply, timeout_);
  if (out.ok()) read_range_reply(reply, out);
  return out;
}

EtcdReply EtcdClient::txn(const std::vector<EtcdCompare>& compare,
                          const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure,
                          Deadline until) {
  json::value reply;
  EtcdReply out =
      post("/v3/kv/txn", etcd_txn_request(compare, success, failure), reply, timeout_, until);
  if (out.ok()) read_txn_reply(reply, out);
  return out;
}

EtcdReply EtcdClient::grant(int64_t ttl_s) {
  json::value reply;
  EtcdReply out =
      post("/v3/lease/grant", json::object{{"TTL", std::to_string(ttl_s)}}, reply, timeout_);
  if (out.ok()) read_grant_reply(reply, out);
  return out;
}

EtcdReply EtcdClient::keepalive(int64_t lease_id, std::chrono::milliseconds timeout) {
  json::value reply;
  EtcdReply out = post("/v3/lease/keepalive", json::object{{"ID", std::to_string(lease_id)}}, reply,
                       std::min(timeout, timeout_));
  if (out.ok()) read_keepalive_reply(reply, out);
  return out;
}

EtcdReply EtcdClient::revoke(int64_t lease_id) {
  json::value reply;
  return post("/v3/lease/revoke", json::object{{"ID", std::to_string(lease_id)}}, reply, timeout_);
}

}  // namespace imhash
