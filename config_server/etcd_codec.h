// The etcd v3 JSON gateway's encoding (config_server/etcd_client.h speaks it over HTTP): the
// requests a transaction, a range and a lease call send, and readers of the replies. Keys and
// values are bytes, base64 on the wire; int64 fields arrive as JSON strings (the gateway's
// encoding) and are read as such. Pure (no I/O), so unit tests and the fuzz target
// (tests/fuzz/fuzz_etcd_reply.cpp) call it directly. Any thread.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  bool refused = false;    // the error is a 4xx: the request was refused as such, not applied
  bool succeeded = false;  // txn: the compares held (the success branch ran)
  int64_t revision = 0;    // the store's revision after the request (header.revision)
  std::vector<std::vector<EtcdKv>> ranges;  // range: one list; txn: one per range op, in order
  int64_t lease_id = 0;                     // grant
  int64_t ttl_s = 0;  // grant, keepalive (0 from keepalive: the lease is gone)
  bool ok() const { return error.empty(); }
};

// A range over one key, or over every key that starts with `key`.
boost::json::object etcd_range_request(const std::string& key, bool prefix);
// A transaction: if every compare holds, the success ops, else the failure ops.
boost::json::object etcd_txn_request(const std::vector<EtcdCompare>& compare,
                                     const std::vector<EtcdOp>& success,
                                     const std::vector<EtcdOp>& failure);

// Readers of a 200 reply's JSON (`reply` any JSON value): each fills what its call returns and sets
// `out.error` if the reply is not what the gateway sends; they never throw.
void read_range_reply(const boost::json::value& reply, EtcdReply& out);
void read_txn_reply(const boost::json::value& reply, EtcdReply& out);
void read_grant_reply(const boost::json::value& reply, EtcdReply& out);
void read_keepalive_reply(const boost::json::value& reply, EtcdReply& out);
// The "error" text of an error reply ("" if there is none).
std::string etcd_error_text(const boost::json::value& reply);

std::string etcd_base64(std::string_view bytes);
// false for text that is not base64.
bool etcd_unbase64(std::string_view text, std::string& out);

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string etcd_prefix_end(const std::string& prefix);

}  // namespace imhash
