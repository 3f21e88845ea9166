#include "config_server/admin_http.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <exception>
#include <optional>
#include <unordered_map>

#include "admin_api/admin_guard.h"
#include "common/codec/endpoint.h"
#include "config_server/status_page.h"

namespace imhash {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);
// Refused connections get a 503 from a small coroutine each; beyond this many at once they are
// closed without a word.
constexpr size_t kMaxRefusing = 64;
// After an error reply the connection is half-closed and the client's remaining bytes are read and
// dropped for this long (or this much), so that a close with unread data (a TCP reset) does not
// destroy the reply before the client reads it.
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr size_t kLingerBytes = size_t{1} << 20;

using Response = http::response<http::string_body>;

Response make_response(unsigned status, const json::value& body, unsigned version,
                       bool keep_alive) {
  Response res;
  res.version(version);
  res.result(status);
  res.set(http::field::server, "imhash-config");
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.body() = json::serialize(body) + "\n";
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

Response html_response(const char* html, unsigned version, bool keep_alive) {
  Response res;
  res.version(version);
  res.result(http::status::ok);
  res.set(http::field::server, "imhash-config");
  res.set(http::field::content_type, "text/html; charset=utf-8");
  res.set(http::field::cache_control, "no-store");
  res.body() = html;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

bool is_status_page(http::verb method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return method == http::verb::get && (path == "/" || path == "/status");
}

Response error_response(unsigned status, const std::string& sentence) {
  return make_response(status, json::object{{"error", sentence}}, 11, false);
}

std::string endpoint_text(const tcp::endpoint& ep) {
  return format_host_port(ep.address().to_string(), ep.port());
}

std::string peer_of(const tcp::socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  return ec ? std::string("(unknown peer)") : endpoint_text(ep);
}

void log_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::warn("admin http: {}", x.what());
  }
}

}  // namespace

// Shared by the server object and its coroutines, so that a coroutine still suspended when the
// server is destroyed finds valid state when the io_context resumes or destroys it.
struct AdminHttpState {
  AdminHttpState(asio::io_context& c, AdminBackend& b, AdminHttpLimits l)
      : ctx(c), backend(b), limits(l), acceptor(c) {}

  // Constant after construction
  asio::io_context& ctx;
  AdminBackend& backend;
  const AdminHttpLimits limits;
  std::string address;
  std::optional<AdminGuard> guard;  // set once bound (it knows the address)

  // io_context thread only
  tcp::acceptor acceptor;
  bool started = false;
  bool stopped = false;
  uint64_t next_id = 0;
  std::unordered_map<uint64_t, beast::tcp_stream*> streams;  // every open connection, for stop()
  size_t sessions = 0;  // sessions spawned and not finished (counted before they first run)
  size_t refusing = 0;  // refusals in flight
};

namespace {

using State = AdminHttpState;

// Registers a connection's stream for stop() for as long as it lives.
class Registration {
 public:
  Registration(State& st, beast::tcp_stream& stream) : st_(st), id_(st.next_id++) {
    st_.streams.emplace(id_, &stream);
  }
  ~Registration() { st_.streams.erase(id_); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  State& st_;
  uint64_t id_;
};

asio::awaitable<void> linger_close(beast::tcp_stream& stream) {
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.expires_after(kLingerTime);
  char sink[4096];
  for (size_t drained = 0; drained < kLingerBytes;) {
    auto [e, n] = co_await stream.async_read_some(asio::buffer(sink), kAwait);
    if (e) break;
    drained += n;
  }
  stream.socket().close(ec);
}

// Writes `res` under the request deadline; false if the connection failed.
asio::awaitable<bool> write(State& st, beast::tcp_stream& stream, Response& res) {
  stream.expires_after(st.limits.request_timeout);
  auto [ec, n] = co_await http::async_write(stream, res, kAwait);
  if (ec && !st.stopped) spdlog::warn("admin http: writing a reply: {}", ec.message());
  co_return !ec;
}

// One error reply, then a close.
asio::awaitable<void> fail(State& st, beast::tcp_stream& stream, const std::string& peer,
                           unsigned status, const std::string& sentence) {
  spdlog::warn("admin http {}: {} {}", peer, status, sentence);
  Response res = error_response(status, sentence);
  if (co_await write(st, stream, res) && !st.stopped) co_await linger_close(stream);
}

asio::awaitable<void> refuse(std::shared_ptr<State> st, tcp::socket socket) {
  struct Count {
    State& st;
    ~Count() { --st.refusing; }
  } count{*st};
  beast::tcp_stream stream(std::move(socket));
  Registration registration(*st, stream);
  co_await fail(*st, stream, peer_of(stream.socket()), 503,
                "too many connections: at most " + std::to_string(st->limits.max_connections) +
                    " at once; try again later");
}

asio::awaitable<void> session(std::shared_ptr<State> st, tcp::socket socket) {
  struct Count {
    State& st;
    ~Count() { --st.sessions; }
  } count{*st};
  if (st->stopped) co_return;
  const std::string peer = peer_of(socket);
  beast::tcp_stream stream(std::move(socket));
  Registration registration(*st, stream);
  beast::flat_buffer buffer;
  spdlog::debug("admin http {}: connected", peer);

  for (;;) {
    // Idle between requests: wait for the first byte of the next one.
    if (buffer.size() == 0) {
      stream.expires_after(st->limits.idle_timeout);
      auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), kAwait);
      if (st->stopped) co_return;
      if (ec) {
        spdlog::debug("admin http {}: closed ({})", peer,
                      ec == beast::error::timeout ? "idle timeout" : ec.message());
        co_return;
      }
      buffer.commit(n);
    }

    // A request has started: it must arrive whole within request_timeout.
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(st->limits.max_header_bytes));
    parser.body_limit(st->limits.max_body_bytes);
    stream.expires_after(st->limits.request_timeout);
    beast::error_code ec;
    std::tie(ec, std::ignore) = co_await http::async_read_header(stream, buffer, parser, kAwait);
    if (st->stopped) co_return;
    if (!ec && !parser.is_done()) {
      // curl sends "Expect: 100-continue" with bodies over 1 KiB and waits for this line.
      const auto& header = parser.get();
      if (header.version() >= 11 && beast::iequals(header[http::field::expect], "100-continue")) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        auto [wec, wn] = co_await asio::async_write(
            stream, asio::buffer(kContinue.data(), kContinue.size()), kAwait);
        if (st->stopped || wec) co_return;
      }
      std::tie(ec, std::ignore) = co_await http::async_read(stream, buffer, parser, kAwait);
      if (st->stopped) co_return;
    }
    if (ec) {
      if (ec == http::error::body_limit) {
        co_await fail(*st, stream, peer, 413,
                      "the request body is larger than " +
                          std::to_string(st->limits.max_body_bytes) + " bytes");
      } else if (ec == http::error::header_limit) {
        co_await fail(*st, stream, peer, 431,
                      "the request header is larger than " +
                          std::to_string(st->limits.max_header_bytes) + " bytes");
      } else if (ec == beast::error::timeout) {
        spdlog::warn("admin http {}: no whole request within {} ms; closed", peer,
                     st->limits.request_timeout.count());
      } else if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
                 ec == asio::error::eof || ec == asio::error::connection_reset) {
        spdlog::warn("admin http {}: the connection closed in the middle of a request", peer);
      } else {
        co_await fail(*st, stream, peer, 400, "malformed HTTP request: " + ec.message());
      }
      co_return;
    }

    const auto& req = parser.get();
    const AdminRequestHeaders headers{.host = req[http::field::host],
                                      .origin = req[http::field::origin],
                                      .content_type = req[http::field::content_type],
                                      .authorization = req[http::field::authorization]};
    if (auto refused = st->guard->check(req.method(), headers)) {
      spdlog::warn("admin http {}: {} {} refused ({}): {}", peer,
                   printable(req.method_string(), 20), printable(req.target(), 200),
                   refused->status, refused->body.as_object().at("error").as_string().c_str());
      Response res = make_response(refused->status, refused->body, req.version(), false);
      co_await write(*st, stream, res);
      co_return;
    }
    if (is_status_page(req.method(), req.target())) {
      Response page = html_response(status_page_html(), req.version(), req.keep_alive());
      if (!co_await write(*st, stream, page) || st->stopped || !req.keep_alive()) co_return;
      continue;
    }
    const auto started = std::chrono::steady_clock::now();
    AdminResult result = handle_admin_request(st->backend, req.method(), req.target(), req.body());
    // A reply to HEAD must not carry a body; this API has no HEAD, so answer 405 and close.
    const bool keep_alive = req.keep_alive() && req.method() != http::verb::head;
    Response res = make_response(result.status, result.body, req.version(), keep_alive);
    if (result.status == 405) {
      res.set(http::field::allow, admin_allowed_methods(req.target()));
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    const std::string target = printable(req.target(), 200);
    const std::string_view method = req.method_string();
    if (result.status < 400) {
      spdlog::debug("admin http {}: {} {} -> {} ({:.2f} ms)", peer, method, target, result.status,
                    ms);
    } else {
      const json::object* object = result.body.if_object();
      const json::value* error = object ? object->if_contains("error") : nullptr;
      spdlog::warn("admin http {}: {} {} -> {}: {}", peer, printable(method, 20), target,
                   result.status,
                   error && error->is_string() ? std::string_view(error->get_string())
                                               : std::string_view("(no error text)"));
    }
    if (!co_await write(*st, stream, res) || st->stopped) co_return;
    if (!keep_alive) {
      co_await linger_close(stream);
      co_return;
    }
  }
}

asio::awaitable<void> accept_loop(std::shared_ptr<State> st) {
  asio::steady_timer pause(st->ctx);
  for (;;) {
    auto [ec, socket] = co_await st->acceptor.async_accept(kAwait);
    if (st->stopped || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // Out of file descriptors, typically: pause rather than spin.
      spdlog::warn("admin http: accept: {}", ec.message());
      pause.expires_after(std::chrono::milliseconds(100));
      co_await pause.async_wait(kAwait);
      if (st->stopped) co_return;
      continue;
    }
    if (st->sessions >= st->limits.max_connections) {
      spdlog::warn("admin http {}: refused: {} connections are open", peer_of(socket),
                   st->sessions);
      if (st->refusing >= kMaxRefusing) {
        boost::system::error_code ignored;
        socket.close(ignored);
        continue;
      }
      ++st->refusing;
      asio::co_spawn(st->ctx, refuse(st, std::move(socket)), log_exception);
      continue;
    }
    ++st->sessions;
    asio::co_spawn(st->ctx, session(st, std::move(socket)), log_exception);
  }
}

}  // namespace

AdminHttpServer::AdminHttpServer(asio::io_context& ctx, AdminBackend& backend,
                                 const std::string& host, uint16_t port, AdminHttpLimits limits,
                                 AdminAccess access)
    : state_(std::make_shared<AdminHttpState>(ctx, backend, limits)) {
  const std::string wanted = format_host_port(host, port);
  try {
    tcp::resolver resolver(ctx);
    const tcp::endpoint endpoint = resolver.resolve(host, std::to_string(port)).begin()->endpoint();
    tcp::acceptor& acceptor = state_->acceptor;
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen();
    state_->address = endpoint_text(acceptor.local_endpoint());
    state_->guard.emplace(state_->address, std::move(access.allow_hosts), std::move(access.token));
  } catch (const boost::system::system_error& e) {
    throw boost::system::system_error(e.code(), "admin API: cannot listen on " + wanted);
  }
}

AdminHttpServer::~AdminHttpServer() { stop(); }

std::string AdminHttpServer::local_address() const { return state_->address; }

void AdminHttpServer::start() {
  if (state_->started || state_->stopped) return;
  state_->started = true;
  asio::co_spawn(state_->ctx, accept_loop(state_), log_exception);
}

void AdminHttpServer::stop() {
  AdminHttpState& st = *state_;
  if (st.stopped) return;
  st.stopped = true;
  boost::system::error_code ec;
  st.acceptor.close(ec);
  // Closing cancels each connection's pending operation; its coroutine then sees `stopped` and
  // ends (and leaves `streams`) when the io_context next runs it.
  for (auto& [id, stream] : st.streams) stream->close();
}

size_t AdminHttpServer::connections() const { return state_->sessions; }

}  // namespace imhash
