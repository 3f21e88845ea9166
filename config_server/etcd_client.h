// EtcdClient: a blocking client of etcd v3's JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke; HTTP/1.1 through Beast, see
// common/links/http_client.h). Keys and values are bytes (base64 on the wire); int64 fields arrive
// as JSON strings and are read as such.
//
// Several endpoints (the members of one etcd cluster): a request goes to the member that answered
// last; one that cannot be reached, times out, or answers that it cannot serve now (no leader, a
// 5xx) is skipped for the next, each member at most once per request. So a member lost out of
// three costs one failed connect (a refused connection is immediate; a silent host costs the
// timeout), and etcd unreachable is an error value, never a hang: each attempt is bounded by
// `timeout`.
//
// Blocking: it runs each request on its own short-lived io_context. The config server calls it on
// its main thread for what must be linearizable (a table change, the election), which is rare and
// short; not thread-safe (one thread at a time).
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/runtime/options.h"
#include "config_server/etcd_codec.h"

namespace imhash {

struct EtcdStats {
  uint64_t requests = 0;
  uint64_t failures = 0;  // requests no member answered
  double last_ms = 0;     // the latest request, all attempts included
  double total_ms = 0;    // over every request (mean = total_ms / requests)
};

class EtcdClient {
 public:
  // `endpoints`: the client addresses of the members ("HOST:PORT"), at least one.
  EtcdClient(std::vector<HostPort> endpoints, std::chrono::milliseconds timeout);

  using Deadline = std::chrono::steady_clock::time_point;

  EtcdReply get(const std::string& key, bool prefix = false);
  // `until`: no member is tried past it, and each waits at most until then (default: only the
  // per-member timeout bounds the request).
  EtcdReply txn(const std::vector<EtcdCompare>& compare, const std::vector<EtcdOp>& success,
                const std::vector<EtcdOp>& failure = {}, Deadline until = Deadline::max());
  EtcdReply grant(int64_t ttl_s);
  // `timeout`: per member, at most the client's (a keepalive is answered without a disk write, so
  // it can be bounded tighter than a transaction).
  EtcdReply keepalive(int64_t lease_id, std::chrono::milliseconds timeout);
  EtcdReply revoke(int64_t lease_id);

  const EtcdStats& stats() const { return stats_; }
  // "HOST:PORT,HOST:PORT" of every member.
  std::string describe() const;

 private:
  // POSTs `body` to `path` on the members as described above; the parsed reply, or an error.
  EtcdReply post(const char* path, const boost::json::value& body, boost::json::value& reply,
                 std::chrono::milliseconds timeout, Deadline until = Deadline::max());

  std::vector<HostPort> endpoints_;
  std::chrono::milliseconds timeout_;
  size_t current_ = 0;  // the member that answered last
  EtcdStats stats_;
};

}  // namespace imhash
