// Fuzz target for the readers of etcd's JSON gateway replies (config_server/etcd_codec.h): what the
// config server believes about the store comes through them. The input is JSON text given to every
// reader. Invariants, checked with abort() so they hold in release builds too:
//   - no reader throws, whatever the JSON;
//   - the key-values a range or txn reply yields, written back in the gateway's encoding (base64,
//     int64 as strings), read back the same;
//   - base64 round-trips the input's bytes, and etcd_prefix_end(p) sorts after p and after every
//     key that starts with p.
#include <algorithm>
#include <boost/json.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "config_server/etcd_codec.h"

namespace json = boost::json;

namespace {

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_etcd_reply: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

json::object encoded(const imhash::EtcdKv& kv) {
  return json::object{{"key", imhash::etcd_base64(kv.key)},
                      {"value", imhash::etcd_base64(kv.value)},
                      {"create_revision", std::to_string(kv.create_revision)},
                      {"mod_revision", std::to_string(kv.mod_revision)},
                      {"version", std::to_string(kv.version)},
                      {"lease", std::to_string(kv.lease)}};
}

bool same(const imhash::EtcdKv& a, const imhash::EtcdKv& b) {
  return a.key == b.key && a.value == b.value && a.create_revision == b.create_revision &&
         a.mod_revision == b.mod_revision && a.version == b.version && a.lease == b.lease;
}

// Every range the reader yielded, encoded again as one range reply, reads back the same.
void check_ranges(const imhash::EtcdReply& r) {
  for (const std::vector<imhash::EtcdKv>& range : r.ranges) {
    json::array kvs;
    for (const imhash::EtcdKv& kv : range) kvs.push_back(encoded(kv));
    imhash::EtcdReply again;
    imhash::read_range_reply(json::object{{"kvs", std::move(kvs)}}, again);
    if (!again.ok()) violated("re-encoded range unreadable", again.error);
    if (again.ranges.size() != 1 || again.ranges[0].size() != range.size()) {
      violated("re-encoded range changed size");
    }
    for (size_t i = 0; i < range.size(); ++i) {
      if (!same(range[i], again.ranges[0][i]))
        violated("re-encoded key-value changed", range[i].key);
    }
  }
}

// Byte order as etcd compares keys: unsigned.
bool sorts_before(const std::string& a, const std::string& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
  });
}

void check_bytes(std::string_view bytes) {
  std::string back;
  if (!imhash::etcd_unbase64(imhash::etcd_base64(bytes), back) || back != bytes) {
    violated("base64 round trip");
  }
  // A prefix of only 0xff bytes has no end but "every key" ("\0"), which the readers never need.
  const std::string prefix(bytes.substr(0, 16));
  if (prefix.find_first_not_of('\xff') == std::string::npos) return;
  const std::string end = imhash::etcd_prefix_end(prefix);
  if (!sorts_before(prefix, end) || !sorts_before(prefix + std::string(8, '\xff'), end)) {
    violated("prefix end does not bound the prefix");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_bytes(text);
  boost::system::error_code ec;
  const json::value reply = json::parse(text, ec);
  if (ec) return 0;
  try {
    imhash::EtcdReply range, txn, grant, keepalive;
    imhash::read_range_reply(reply, range);
    imhash::read_txn_reply(reply, txn);
    imhash::read_grant_reply(reply, grant);
    imhash::read_keepalive_reply(reply, keepalive);
    (void)imhash::etcd_error_text(reply);
    if (range.ok()) check_ranges(range);
    if (txn.ok()) check_ranges(txn);
  } catch (const std::exception& e) {
    violated("a reader threw", e.what());
  }
  return 0;
}
