#include "config_server/node_session.h"

#include <spdlog/spdlog.h>

#include "common/endpoint.h"
#include "config_server/config_service.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace imhash {

namespace {
// A node that sends more than this unanswered is cut off: bounded memory per link.
constexpr size_t kMaxQueued = 64 << 20;
}  // namespace

NodeSession::NodeSession(tcp::socket socket, ConfigService& service,
                         std::shared_ptr<asio::ssl::context> tls)
    : socket_(std::move(socket)),
      service_(service),
      register_timer_(socket_.get_executor()),
      auth_(service.cluster_key()) {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  if (!ec) peer_ = format_host_port(ep.address().to_string(), ep.port());
  socket_.set_option(tcp::no_delay(true), ec);
  if (tls) tls_.emplace(socket_, *tls);  // the context outlives every session (main)
}

void NodeSession::start() {
  asio::co_spawn(
      socket_.get_executor(), [self = shared_from_this()] { return self->read_loop(); },
      asio::detached);
  register_timer_.expires_after(kRegisterTimeout);
  register_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_ || !self->key.empty()) return;
    spdlog::warn("node link from {}: no registration within {} s; closed", self->peer_,
                 kRegisterTimeout.count());
    self->close();
  });
}

void NodeSession::close() {
  if (closed_) return;
  closed_ = true;
  register_timer_.cancel();
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void NodeSession::send(const control::Message& m) {
  if (closed_) return;
  control::append_message(m, queued_);
  if (queued_.size() > kMaxQueued) {
    spdlog::warn("node {} ({}) is not reading; closing its link", key, peer_);
    close();
    return;
  }
  write_next();
}

void NodeSession::send_last(const control::Message& m) {
  send(m);
  close_when_written_ = true;
  write_next();
}

void NodeSession::write_next() {
  if (closed_) return;
  if (!write_in_progress_ && queued_.empty() && close_when_written_) {
    close();
    return;
  }
  if (write_in_progress_ || queued_.empty()) return;
  write_in_progress_ = true;
  writing_.swap(queued_);
  auto written = [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    self->write_in_progress_ = false;
    self->writing_.clear();
    if (ec) {
      self->close();
      return;
    }
    self->write_next();
  };
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(writing_), std::move(written));
  } else {
    asio::async_write(socket_, asio::buffer(writing_), std::move(written));
  }
}

asio::awaitable<void> NodeSession::read_loop() {
  // Messages are small but a node may send a large stats heartbeat: the buffer grows for one
  // message up to the protocol's limit, and shrinks back once it is consumed.
  StreamBuffer in(64 * 1024, control::kLengthPrefixSize + control::kMaxMessageSize);
  if (tls_) {
    auto [ec] = co_await tls_->async_handshake(asio::ssl::stream_base::server,
                                               asio::as_tuple(asio::use_awaitable));
    if (ec) {
      spdlog::warn("node link from {}: refused: TLS handshake failed: {}", peer_, ec.message());
      close();
      co_return;
    }
  }
  for (;;) {
    const auto space = in.space();
    const auto buffer = asio::buffer(space.data(), space.size());
    auto [ec, n] =
        tls_ ? co_await tls_->async_read_some(buffer, asio::as_tuple(asio::use_awaitable))
             : co_await socket_.async_read_some(buffer, asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    in.commit(n);
    std::string error;
    const auto st = control::drain_messages(in, error, [&](const control::Message& m) {
      if (close_when_written_) return false;  // refused: the rest is not read
      std::optional<control::Message> reply;
      std::string why;
      switch (auth_.on_message(m, reply, why)) {
        case NodeAuth::Verdict::kReply:
          if (reply) send(*reply);
          return !closed_;
        case NodeAuth::Verdict::kRefuse:
          spdlog::warn("node link from {}: refused: {}", peer_, why);
          service_.note_auth_refused();
          send_last(control::Refused{why});
          return false;
        case NodeAuth::Verdict::kPass:
          break;
      }
      service_.on_message(*this, m);
      return !closed_ && !close_when_written_;
    });
    if (st != control::DecodeStatus::kNeedMore && st != control::DecodeStatus::kOk) {
      spdlog::warn("node link {}: bad message: {}; closing", peer_, error);
      break;
    }
    if (closed_) break;
  }
  // After send_last() the write completion closes the link, so that the refusal is delivered.
  if (!close_when_written_) close();
  service_.on_disconnect(*this);
}

}  // namespace imhash
