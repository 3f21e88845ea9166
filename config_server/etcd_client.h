// EtcdClient: a blocking client of etcd v3's JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke; HTTP/1.1 through Beast, see
// config_server/imctl_http.h). Keys and values are bytes (base64 on the wire); int64 fields arrive
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

#include "common/options.h"

namespace imhash {

struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// One compare of a transaction: the key's create revision, mod revision or value equals the one
// given (a key that does not exist has revisions 0).
struct EtcdCompare {
  enum class Target : uint8_t { kCreate, kMod, kValue };
  std::string key;
  Target target = Target::kMod;
  int64_t revision = 0;  // kCreate, kMod
  std::string value;     // kValue
};

// One operation of a transaction's branch.
struct EtcdOp {
  enum class Kind : uint8_t { kPut, kDelete, kRange };
  Kind kind = Kind::kRange;
  std::string key;
  std::string value;    // kPut
  int64_t lease = 0;    // kPut: attach to this lease (0: none)
  bool prefix = false;  // kDelete, kRange: every key that starts with `key`
};

struct EtcdReply {
  std::string error;       // "" on success; else one sentence naming the member(s) and what failed
  bool succeeded = false;  // txn: the compares held (the success branch ran)
  int64_t revision = 0;    // the store's revision after the request (header.revision)
  std::vector<std::vector<EtcdKv>> ranges;  // range: one list; txn: one per range op, in order
  int64_t lease_id = 0;                     // grant
  int64_t ttl_s = 0;  // grant, keepalive (0 from keepalive: the lease is gone)
  bool ok() const { return error.empty(); }
};

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

  EtcdReply get(const std::string& key, bool prefix = false);
  EtcdReply txn(const std::vector<EtcdCompare>& compare, const std::vector<EtcdOp>& success,
                const std::vector<EtcdOp>& failure = {});
  EtcdReply grant(int64_t ttl_s);
  EtcdReply keepalive(int64_t lease_id);
  EtcdReply revoke(int64_t lease_id);

  const EtcdStats& stats() const { return stats_; }
  // "HOST:PORT,HOST:PORT" of every member.
  std::string describe() const;

 private:
  // POSTs `body` to `path` on the members as described above; the parsed reply, or an error.
  EtcdReply post(const char* path, const boost::json::value& body, boost::json::value& reply);

  std::vector<HostPort> endpoints_;
  std::chrono::milliseconds timeout_;
  size_t current_ = 0;  // the member that answered last
  EtcdStats stats_;
};

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string etcd_prefix_end(const std::string& prefix);

}  // namespace imhash
