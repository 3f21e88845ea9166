#include "harness/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <sstream>

#include "harness/child_process.h"

namespace imhash::test {

namespace {

// Sends the whole request `req` and reads the reply until the server closes the connection.
HttpReply http_request(const std::string& address, const std::string& req) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port_of(address));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    for (size_t sent = 0; sent < req.size();) {
      const ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[65536];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  HttpReply reply;
  const auto body = out.find("\r\n\r\n");
  if (body == std::string::npos || std::sscanf(out.c_str(), "HTTP/%*s %d", &reply.status) != 1) {
    return {};
  }
  reply.body = out.substr(body + 4);
  return reply;
}

}  // namespace

HttpReply http_get(const std::string& address, const std::string& target) {
  return http_request(address, "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
}

HttpReply http_post(const std::string& address, const std::string& target, const std::string& body,
                    const std::string& content_type) {
  return http_request(
      address, "POST " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: " + content_type +
                   "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
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
