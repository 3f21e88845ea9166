#include "config_server/node_session.h"

#include <spdlog/spdlog.h>

#include "common/codec/endpoint.h"
#include "common/runtime/clock.h"
#include "config_server/config_service.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace imhash {

namespace {
// A node that sends more than this unanswered is cut off: bounded memory per link.
constexpr size_t kMaxQueued = 64 << 20;

long long whole_ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }
}  // namespace

bool LogBudget::allow(std::string& more) {
  const int64_t now = monotonic_ns();
  if (last_ns != 0 && now - last_ns < 1'000'000'000) {
    ++skipped;
    return false;
  }
  more = skipped == 0 ? std::string()
                      : " (" + std::to_string(skipped) + " more like it in the last second)";
  last_ns = now;
  skipped = 0;
  return true;
}

NodeSession::NodeSession(cluster::LinkId id, tcp::socket socket, ConfigService& service,
                         const NodeLinkLimits& limits, NodeLinkCounters& counters,
                         std::shared_ptr<asio::ssl::context> tls)
    : id_(id),
      socket_(std::move(socket)),
      service_(service),
      limits_(limits),
      counters_(counters),
      timer_(socket_.get_executor()),
      auth_(service.cluster_key()) {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  if (!ec) {
    peer_address_ = ep.address();
    if (peer_address_.is_v6() && peer_address_.to_v6().is_v4_mapped()) {
      peer_address_ = asio::ip::make_address_v4(asio::ip::v4_mapped, peer_address_.to_v6());
    }
    peer_ = format_host_port(ep.address().to_string(), ep.port());
  }
  socket_.set_option(tcp::no_delay(true), ec);
  if (tls) tls_.emplace(socket_, *tls);  // the context outlives every session (main)
}

void NodeSession::start() {
  last_read_ = Clock::now();
  asio::co_spawn(
      socket_.get_executor(), [self = shared_from_this()] { return self->read_loop(); },
      asio::detached);
  arm_timer(limits_.register_timeout);
}

void NodeSession::arm_timer(Clock::duration after) {
  timer_.expires_after(after);
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!ec && self) self->on_timer();
  });
}

// At the registration deadline, then whenever the link may have gone idle: a registered node sends
// a heartbeat every interval, so one that sends nothing for idle_timeout is gone (and DOWN by the
// heartbeat rule already); closing frees its descriptor and buffers.
void NodeSession::on_timer() {
  if (closed_) return;
  if (key_.empty()) {
    ++counters_.register_timeouts;
    if (std::string more; counters_.closes_log.allow(more)) {
      spdlog::warn("node link from {}: no registration within {} ms; closed{}", peer_,
                   whole_ms(limits_.register_timeout), more);
    }
    close();
    return;
  }
  const auto quiet = Clock::now() - last_read_;
  if (quiet < limits_.idle_timeout) {
    arm_timer(limits_.idle_timeout - quiet);
    return;
  }
  ++counters_.idle_timeouts;
  if (std::string more; counters_.closes_log.allow(more)) {
    spdlog::warn("node {} ({}): nothing received for {} ms; closing its link{}", key_, peer_,
                 whole_ms(limits_.idle_timeout), more);
  }
  close();
}

void NodeSession::close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void NodeSession::send(const control::Message& m) {
  if (closed_) return;
  control::append_message(m, queued_);
  queued();
}

void NodeSession::send_encoded(std::span<const uint8_t> framed) {
  if (closed_) return;
  queued_.insert(queued_.end(), framed.begin(), framed.end());
  queued();
}

void NodeSession::queued() {
  if (queued_.size() > kMaxQueued) {
    spdlog::warn("node {} ({}) is not reading; closing its link", key_, peer_);
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
  // Messages are small, but a heartbeat's stats may run to some KiB: the buffer is allocated at the
  // first read, grows for one message up to the link's limit, and shrinks back once it is consumed.
  StreamBuffer in(limits_.initial_buffer, control::kLengthPrefixSize + limits_.max_message);
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
    last_read_ = Clock::now();
    in.commit(n);
    std::string error;
    // An unregistered link may send a register and nothing larger; the rest of what arrived with
    // the register is decoded under the registered link's limit.
    const auto limit = [&] {
      return key_.empty() ? limits_.max_unregistered_message : limits_.max_message;
    };
    control::DecodeStatus st;
    for (;;) {
      const uint32_t max_size = limit();
      st = control::drain_messages(
          in, error,
          [&](const control::Message& m) {
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
                send_last(control::Refused{why, ""});
                return false;
              case NodeAuth::Verdict::kPass:
                break;
            }
            service_.on_message(*this, m);
            return !closed_ && !close_when_written_ && limit() == max_size;
          },
          max_size);
      if (st != control::DecodeStatus::kOk || closed_ || close_when_written_ ||
          limit() == max_size) {
        break;
      }
    }
    if (st != control::DecodeStatus::kNeedMore && st != control::DecodeStatus::kOk) {
      ++counters_.bad_messages;
      if (std::string more; counters_.closes_log.allow(more)) {
        spdlog::warn("node link {}: bad message: {}; closing{}", peer_, error, more);
      }
      break;
    }
    if (closed_) break;
  }
  // After send_last() the write completion closes the link, so that the refusal is delivered.
  if (!close_when_written_) close();
  service_.on_disconnect(*this);
}

}  // namespace imhash
