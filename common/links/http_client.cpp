#include "common/links/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>

#include "common/codec/endpoint.h"

namespace imhash {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);

HttpOutcome failed(HttpFailure failure, std::string error) {
  return HttpOutcome{failure, std::move(error), {}};
}

// A lost connection is "unreachable"; the stream's own deadline is a timeout.
HttpOutcome network_failure(const beast::error_code& ec, const char* during) {
  if (ec == beast::error::timeout) return failed(HttpFailure::kTimeout, during);
  return failed(HttpFailure::kUnreachable, ec.message());
}

asio::awaitable<HttpOutcome> exchange(std::string host, uint16_t port, http::verb method,
                                      std::string target, std::string body, std::string token,
                                      std::chrono::steady_clock::time_point deadline) {
  auto ex = co_await asio::this_coro::executor;

  // getaddrinfo cannot be interrupted, so resolution is not bounded by the deadline; with a
  // numeric address (the usual --admin) it returns at once.
  tcp::resolver resolver(ex);
  auto [rec, endpoints] = co_await resolver.async_resolve(host, std::to_string(port), kAwait);
  if (rec) co_return failed(HttpFailure::kUnreachable, rec.message());
  if (std::chrono::steady_clock::now() >= deadline) {
    co_return failed(HttpFailure::kTimeout, "resolving " + host);
  }

  beast::tcp_stream stream(ex);
  stream.expires_at(deadline);  // from here on, one deadline for connect, write and read
  auto [cec, connected] = co_await stream.async_connect(endpoints, kAwait);
  if (cec) co_return network_failure(cec, "connecting");

  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, format_host_port(host, port));
  req.set(http::field::user_agent, "imhash");
  req.set(http::field::accept, "application/json");
  // Every state-changing request says it is JSON: the admin API refuses one that does not (a
  // browser cannot send that cross-site without a preflight).
  if (!body.empty() || method != http::verb::get) {
    req.set(http::field::content_type, "application/json");
  }
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  req.body() = std::move(body);
  req.keep_alive(false);
  req.prepare_payload();
  auto [wec, written] = co_await http::async_write(stream, req, kAwait);
  if (wec) co_return network_failure(wec, "sending the request");

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kHttpMaxReplyBytes);
  auto [rdec, read] = co_await http::async_read(stream, buffer, parser, kAwait);
  if (rdec == beast::error::timeout) co_return failed(HttpFailure::kTimeout, "reading the reply");
  if (rdec == http::error::end_of_stream || rdec == asio::error::eof) {
    co_return failed(HttpFailure::kBadReply, "the connection closed before a reply");
  }
  if (rdec == asio::error::connection_reset)
    co_return failed(HttpFailure::kUnreachable, rdec.message());
  if (rdec) co_return failed(HttpFailure::kBadReply, "unreadable HTTP reply: " + rdec.message());
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  HttpOutcome outcome;
  outcome.reply.status = parser.get().result_int();
  outcome.reply.body = std::move(parser.get().body());
  co_return outcome;
}

}  // namespace

HttpOutcome http_exchange(const std::string& host, uint16_t port, http::verb method,
                          const std::string& target, const std::string& body,
                          std::chrono::milliseconds timeout, const std::string& token) {
  asio::io_context ctx(1);
  HttpOutcome outcome = failed(HttpFailure::kBadReply, "no reply");
  asio::co_spawn(
      ctx,
      exchange(host, port, method, target, body, token, std::chrono::steady_clock::now() + timeout),
      [&](std::exception_ptr e, HttpOutcome result) {
        if (!e) {
          outcome = std::move(result);
          return;
        }
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          outcome = failed(HttpFailure::kBadReply, x.what());
        }
      });
  ctx.run();
  return outcome;
}

}  // namespace imhash
