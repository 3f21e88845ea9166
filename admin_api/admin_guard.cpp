#include "admin_api/admin_guard.h"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/codec/endpoint.h"
#include "common/runtime/key_file.h"
#include "common/runtime/options.h"

namespace imhash {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "127.0.0.1:7100" -> host "127.0.0.1", port "7100"; "[::1]:7100" -> "[::1]", "7100".
std::pair<std::string, std::string> split_host_port(std::string_view hp) {
  const size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos || hp.find(']', colon) != std::string_view::npos) {
    return {std::string(hp), ""};
  }
  return {std::string(hp.substr(0, colon)), std::string(hp.substr(colon + 1))};
}

std::string join_host_port(std::string_view host, std::string_view port) {
  std::string h(host);
  if (h.find(':') != std::string::npos && !h.starts_with("[")) h = "[" + h + "]";
  return h + ":" + std::string(port);
}

}  // namespace

AdminGuard::AdminGuard(const std::string& bound, std::vector<std::string> extra_hosts,
                       std::string token)
    : token_(std::move(token)) {
  const auto [host, port] = split_host_port(lower(bound));
  if (!is_unspecified_host(host)) hosts_.push_back(join_host_port(host, port));
  // On loopback (or every address), the names a local operator's tools use for this machine.
  if (is_loopback_host(host) || is_unspecified_host(host)) {
    for (const char* h : {"localhost", "127.0.0.1", "[::1]"}) {
      hosts_.push_back(join_host_port(h, port));
    }
  }
  for (const std::string& e : extra_hosts) hosts_.push_back(lower(e));
  // A Host without a port (HTTP's default) names the same machine: accept the bare names too.
  const size_t with_ports = hosts_.size();
  for (size_t i = 0; i < with_ports; ++i) hosts_.push_back(split_host_port(hosts_[i]).first);
  std::sort(hosts_.begin(), hosts_.end());
  hosts_.erase(std::unique(hosts_.begin(), hosts_.end()), hosts_.end());
}

bool AdminGuard::host_allowed(std::string_view host) const {
  const std::string h = lower(trim(host));
  return std::find(hosts_.begin(), hosts_.end(), h) != hosts_.end();
}

std::optional<AdminResult> AdminGuard::check(http::verb method,
                                             const AdminRequestHeaders& headers) const {
  // Browsers always send Host; a request without one (HTTP/1.0) is no DNS-rebinding attempt.
  if (!headers.host.empty() && !host_allowed(headers.host)) {
    return AdminResult::error(403,
                              "the Host header '" + std::string(headers.host.substr(0, 100)) +
                                  "' is not this admin API's address (see --admin-allow-host)");
  }
  if (!headers.origin.empty()) {
    const std::string origin = lower(trim(headers.origin));
    std::string_view rest = origin;
    bool ok = false;
    for (std::string_view scheme : {"http://", "https://"}) {
      if (rest.starts_with(scheme)) ok = host_allowed(rest.substr(scheme.size()));
    }
    if (!ok) {
      return AdminResult::error(403, "cross-origin request from '" +
                                         std::string(headers.origin.substr(0, 100)) + "' refused");
    }
  }
  if (method == http::verb::get || method == http::verb::head) return std::nullopt;
  const std::string type =
      lower(trim(headers.content_type.substr(0, headers.content_type.find(';'))));
  if (type != "application/json") {
    return AdminResult::error(415,
                              "a request that changes state must have Content-Type "
                              "application/json");
  }
  if (!token_.empty()) {
    constexpr std::string_view kBearer = "bearer ";
    const std::string_view auth = trim(headers.authorization);
    const bool bearer =
        auth.size() > kBearer.size() && lower(auth.substr(0, kBearer.size())) == kBearer;
    const std::string_view given = bearer ? trim(auth.substr(kBearer.size())) : std::string_view{};
    if (given.size() != token_.size() ||
        CRYPTO_memcmp(given.data(), token_.data(), token_.size()) != 0) {
      return AdminResult::error(401,
                                "this request needs the admin token (imctl --token-file, or "
                                "Authorization: Bearer TOKEN)");
    }
  }
  return std::nullopt;
}

std::string load_admin_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("token file " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (const std::string problem = key_file_mode_problem(st.st_mode); !problem.empty()) {
      throw ConfigError("token file " + path + " " + problem + ": chmod 600 it");
    }
  }
  std::ostringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  const std::string_view token = trim(content);
  if (token.size() < 16)
    throw ConfigError("token file " + path + ": the token is shorter than 16 characters");
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 127; })) {
    throw ConfigError("token file " + path + ": the token must be one word of printable ASCII");
  }
  return std::string(token);
}

}  // namespace imhash
