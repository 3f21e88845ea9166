#include "harness/http_get.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common/links/http_client.h"
#include "common/runtime/options.h"

namespace imhash::test {

namespace {

constexpr std::chrono::seconds kHttpTimeout{5};

HttpReply request(const std::string& address, boost::beast::http::verb method,
                  const std::string& target, const std::string& body) {
  const HostPort where = parse_host_port(address, "address");
  const HttpOutcome o = http_exchange(where.host, where.port, method, target, body, kHttpTimeout);
  if (o.failure != HttpFailure::kNone) return {};
  return {static_cast<int>(o.reply.status), o.reply.body};
}

}  // namespace

HttpReply http_get(const std::string& address, const std::string& target) {
  return request(address, boost::beast::http::verb::get, target, "");
}

HttpReply http_post(const std::string& address, const std::string& target,
                    const std::string& body) {
  return request(address, boost::beast::http::verb::post, target, body);
}

std::string url_encode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::string scrape(const std::string& address) { return http_get(address, "/metrics").body; }

double metric(const std::string& text, const std::string& name, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    const std::string key = line.substr(0, space);
    const std::string base = key.substr(0, key.find('{'));
    if (base != name) continue;
    if (!label.empty() && key.find(label) == std::string::npos) continue;
    sum += std::stod(line.substr(space + 1));
  }
  return sum;
}

}  // namespace imhash::test
