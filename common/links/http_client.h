// The HTTP client of imctl (the config server's admin API) and of the etcd client (etcd's JSON
// gateway): one request and its reply (Boost.Beast, HTTP/1.1), bounded by a timeout that covers
// name resolution, connecting, sending and receiving. Failures are values.
//
// Thread rules: a blocking function with its own io_context; any thread may call it.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <string>

namespace imhash {

struct HttpReply {
  unsigned status = 0;
  std::string body;
};

enum class HttpFailure : uint8_t {
  kNone,         // `reply` holds the server's answer (whatever its status)
  kUnreachable,  // the name did not resolve, or the connection was refused, reset or lost
  kTimeout,      // no whole reply within the timeout
  kBadReply,     // something answered, but not with a readable HTTP reply
};

struct HttpOutcome {
  HttpFailure failure = HttpFailure::kNone;
  std::string error;  // what went wrong, e.g. "Connection refused"; empty on success
  HttpReply reply;
};

inline constexpr size_t kHttpMaxReplyBytes = size_t{256} << 20;

// Sends `method target` to host:port (a POST's body as application/json; with `token`, as
// "Authorization: Bearer TOKEN") and reads the reply; the whole exchange takes at most `timeout`.
HttpOutcome http_exchange(const std::string& host, uint16_t port, boost::beast::http::verb method,
                          const std::string& target, const std::string& body,
                          std::chrono::milliseconds timeout, const std::string& token = {});

}  // namespace imhash
