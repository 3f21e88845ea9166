// http_get: a blocking HTTP GET (and POST) to a daemon for integration tests (metrics, the
// Prometheus that the observability test runs, etcd's JSON gateway), over the project's one HTTP
// client (common/links/http_client.h), the whole exchange bounded by 5 s. With a reader of /metrics
// texts. Any thread.
#pragma once

#include <string>

namespace imhash::test {

struct HttpReply {
  int status = 0;  // 0: no reply (connection refused, timeout, garbage)
  std::string body;
};

// `address` "127.0.0.1:PORT"; `target` "/metrics", "/api/v1/query?query=up".
HttpReply http_get(const std::string& address, const std::string& target);

// POST `body` (JSON) to http://ADDRESS/TARGET.
HttpReply http_post(const std::string& address, const std::string& target, const std::string& body);

// `text` percent-encoded for a query string value.
std::string url_encode(const std::string& text);

// GET http://ADDRESS/metrics; the body ("" on failure).
std::string scrape(const std::string& address);

// Sums every sample of `name` in a /metrics text whose label set contains `label`
// (e.g. status="OK"), or all of them.
double metric(const std::string& text, const std::string& name, const std::string& label = "");

}  // namespace imhash::test
