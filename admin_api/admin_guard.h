// AdminGuard: who may use the admin API (docs/security.md, "Admin API"), checked before a request
// reaches the handler. Three checks, after the OWASP guidance on DNS rebinding and CSRF:
//   1. Host: the request's Host header must be one this API answers to (the bound address; on
//      loopback also localhost/127.0.0.1/[::1] with the port; plus --admin-allow-host entries).
//      A page served from evil.example whose name is rebound to 127.0.0.1 sends Host:
//      evil.example:PORT and is refused (403). A request without Host (HTTP/1.0) is let through:
//      browsers always send one.
//   2. Origin: a request that carries an Origin header must come from one of those hosts (403
//      otherwise): a cross-site page in an operator's browser cannot drive the API.
//   3. State-changing requests (every method but GET/HEAD): Content-Type application/json (415
//      otherwise; a browser cannot send that cross-site without a CORS preflight, which this API
//      never grants) and, when the config server has an admin token, "Authorization: Bearer
//      TOKEN" (401 otherwise; compared in constant time). Read-only requests need no token, so the
//      status page keeps working.
// Pure: no sockets, no logging. Any thread (the guard is immutable once built).
#pragma once

#include <boost/beast/http/verb.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_api/admin_contract.h"

namespace imhash {

struct AdminRequestHeaders {
  std::string_view host{};           // "" when absent
  std::string_view origin{};         // "" when absent
  std::string_view content_type{};   // "" when absent
  std::string_view authorization{};  // "" when absent
};

class AdminGuard {
 public:
  // `bound` is the address the API listens on ("127.0.0.1:7100", "[::1]:7100", "0.0.0.0:7100");
  // `extra_hosts` are further Host values to accept ("admin.example:7100", "10.0.0.10:7100");
  // `token` empty: no token needed.
  AdminGuard(const std::string& bound, std::vector<std::string> extra_hosts, std::string token);

  // nullopt: let the request through; otherwise the answer (403, 415, 401) with its reason.
  std::optional<AdminResult> check(boost::beast::http::verb method,
                                   const AdminRequestHeaders& headers) const;

  const std::vector<std::string>& hosts() const { return hosts_; }
  bool has_token() const { return !token_.empty(); }

 private:
  bool host_allowed(std::string_view host) const;

  std::vector<std::string> hosts_;  // lower case
  std::string token_;
};

// Reads an admin token file: one line of at least 16 printable characters (surrounding whitespace
// ignored), not readable by other users (as key files). Throws ConfigError naming the file.
std::string load_admin_token_file(const std::string& path);

}  // namespace imhash
