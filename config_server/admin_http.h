// AdminHttpServer: the config server's admin API over HTTP/1.1 (Boost.Beast, Asio coroutines).
// Each request goes through handle_admin_request (admin_handler.h, re-exported here), which calls
// the AdminBackend; every answer is Content-Type application/json, body = one JSON object + "\n".
// Keep-alive and pipelining are supported; limits (AdminHttpLimits) bound every connection: header
// and body sizes (431, 413), a connection cap (503 and close beyond it), an idle timeout, and a
// deadline for reading a request once its first byte arrived. Malformed HTTP gets 400 and a close.
// The API is unauthenticated: bind it to loopback (docs/design.md §6) unless told otherwise.
//
// Thread rules: everything runs on the io_context given to the constructor (the config server's
// main thread, the one thread the backend may be called from). Construct before that io_context
// runs or on its thread; call start(), stop(), local_address() and connections() on that thread;
// destroy the server (which stops it) on that thread or after it stopped running, and before the
// io_context itself. Sessions still open hold shared state and end on their own as it runs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "config_server/admin_backend.h"
#include "config_server/admin_handler.h"

namespace imhash {

struct AdminHttpState;  // admin_http.cpp: what the server shares with its coroutines

struct AdminHttpLimits {
  size_t max_connections = 256;                       // beyond: 503 and close at once
  size_t max_header_bytes = 8 * 1024;                 // beyond: 431 and close
  size_t max_body_bytes = kAdminMaxBodyBytes;         // beyond: 413 and close
  std::chrono::milliseconds idle_timeout{30'000};     // between requests on a kept-alive connection
  std::chrono::milliseconds request_timeout{10'000};  // to read a started request, or write a reply
};

class AdminHttpServer {
 public:
  // Resolves `host` and binds at once (port 0: a free port). Throws boost::system::system_error
  // if the address does not resolve or cannot be bound.
  AdminHttpServer(boost::asio::io_context& ctx, AdminBackend& backend, const std::string& host,
                  uint16_t port, AdminHttpLimits limits = {});
  ~AdminHttpServer();
  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;

  // "HOST:PORT" actually bound ("127.0.0.1:41234", "[::1]:7100"), the port resolved.
  std::string local_address() const;
  // Begins accepting connections (on the io_context; returns at once).
  void start();
  // Closes the acceptor and every open connection; requests not yet answered are dropped and the
  // backend is not called again. Idempotent.
  void stop();
  // Connections open now (for tests and stats).
  size_t connections() const;

 private:
  std::shared_ptr<AdminHttpState> state_;
};

}  // namespace imhash
