#include "common/links/hash_link.h"

#include <spdlog/spdlog.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/runtime/clock.h"
#include "common/runtime/options.h"
#include "common/security/link_auth.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace imhash {

using namespace frame;

const char* to_string(HashLink::State s) {
  switch (s) {
    case HashLink::State::kConnecting:
      return "connecting";
    case HashLink::State::kUp:
      return "up";
    case HashLink::State::kDown:
      return "down";
    case HashLink::State::kClosed:
      return "closed";
  }
  return "?";
}

namespace {
// Room for a full read of pipelined answers plus one maximal frame.
constexpr size_t kFrameReadBufferSize = 4 + kMaxFrameLength + 64 * 1024;

}  // namespace

HashLink::HashLink(asio::io_context& ctx, LinkListener& listener, const LinkSettings& settings,
                   ServerInfo server, uint32_t shard, uint64_t seed)
    : ctx_(ctx),
      listener_(listener),
      settings_(settings),
      server_(std::move(server)),
      shard_(shard),
      socket_(ctx),
      retry_timer_(ctx),
      backoff_(settings.backoff_initial, settings.backoff_max, seed),
      pending_(settings.max_in_flight),
      in_(kFrameReadBufferSize) {
  queued_.reserve(64 * 1024);
  writing_buf_.reserve(64 * 1024);
}

void HashLink::start() {
  IMHASH_ON_OWNER_THREAD(on_thread());
  asio::co_spawn(ctx_, run(), asio::detached);
}

void HashLink::close() {
  IMHASH_ON_OWNER_THREAD(on_thread());
  if (closed_) return;
  closed_ = true;
  retry_timer_.cancel();
  drop_connection();
  fail_all(client::Status::kUnavailable);
  state_ = State::kClosed;
}

bool HashLink::submit(const Request& request, uint64_t token, int64_t now_ns) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  // An older server would read a timed frame's time as an age.
  Request q = peer_timed_ || !(request.flags & kFlagTimed)
                  ? request
                  : frame::untimed(request, unix_millis(), untimed_records_);
  const int64_t deadline =
      now_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(settings_.timeout).count();
  q.correlation = pending_.insert(Sent{token, ++sent_seq_, 0}, deadline);
  pending_.find(q.correlation)->correlation = q.correlation;
  last_sent_ns_ = now_ns;
  const bool was_empty = queued_.empty();
  append_request(q, queued_);
  return was_empty;
}

void HashLink::flush() {
  IMHASH_ON_OWNER_THREAD(on_thread());
  if (writing_ || queued_.empty() || state_ != State::kUp) return;
  writing_ = true;
  writing_buf_.swap(queued_);
  auto written = [this, keep = tls_](const boost::system::error_code& ec, size_t) {
    writing_ = false;
    writing_buf_.clear();
    if (ec) {
      drop_connection();  // the read loop sees it and fails what is in flight
      return;
    }
    flush();
  };
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(writing_buf_), std::move(written));
  } else {
    asio::async_write(socket_, asio::buffer(writing_buf_), std::move(written));
  }
}

void HashLink::tick(int64_t now_ns) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  bool expired = false;
  pending_.expire(now_ns, [&](const Sent& sent) {
    ++consecutive_timeouts_;
    if (sent.token == kKeepaliveToken) return;
    expired = true;
    unsettled_.push_back(sent);
    listener_.on_failure(sent.token, client::Status::kTimeout);
  });
  if (expired) listener_.after_link_io();
  if (state_ == State::kUp && !full() && settings_.keepalive.count() > 0 &&
      now_ns - last_sent_ns_ >= std::chrono::nanoseconds(settings_.keepalive).count()) {
    if (submit(Request{.type = FrameType::kPing}, kKeepaliveToken, now_ns)) flush();
  }
  const int64_t silent_ns = now_ns - last_heard_ns_;
  if (state_ == State::kUp && consecutive_timeouts_ >= settings_.down_after_timeouts &&
      silent_ns >= std::chrono::nanoseconds(settings_.dead_after).count()) {
    spdlog::warn(
        "link to {} shard {}: {} requests timed out and nothing came for {} ms, marking "
        "it down",
        server_.name, shard_, consecutive_timeouts_, silent_ns / 1'000'000);
    drop_connection();
  }
}

void HashLink::drop_connection() {
  boost::system::error_code ec;
  auto& socket = tls_ ? tls_->next_layer() : socket_;
  // Aborted, not closed: a graceful close would leave the kernel retransmitting what the server
  // has not acknowledged (after a partition heals, say), and those frames would arrive after the
  // ones a newer connection carried. What it had not received is lost instead, and reported so.
  socket.set_option(tcp::socket::linger(true, 0), ec);
  socket.close(ec);
}

void HashLink::settle_before(uint64_t seq) {
  while (!unsettled_.empty() && unsettled_.front().seq < seq) {
    const uint64_t token = unsettled_.front().token;
    unsettled_.pop_front();
    listener_.on_settled(token);
  }
}

void HashLink::answer_unsettled(uint32_t correlation, const frame::Response& response) {
  // Answers come in send order: the unsettled frames before it were answered (late) before it.
  for (size_t i = 0; i < unsettled_.size(); ++i) {
    if (unsettled_[i].correlation != correlation) continue;
    const Sent late = unsettled_[i];
    settle_before(late.seq);
    unsettled_.pop_front();  // `late`, at the front now
    listener_.on_late_answer(late.token, response);
    return;
  }
}

void HashLink::fail_all(client::Status status) {
  if (pending_.size() == 0 && unsettled_.empty()) return;
  // The connection is gone: the timed-out frames no later answer settled are lost, and so is
  // what was in flight.
  while (!unsettled_.empty()) {
    const uint64_t token = unsettled_.front().token;
    unsettled_.pop_front();
    listener_.on_lost(token);
  }
  pending_.drain([&](const Sent& sent) {
    if (sent.token != kKeepaliveToken) listener_.on_failure(sent.token, status);
  });
  listener_.after_link_io();
}

asio::awaitable<void> HashLink::run() {
  while (!closed_) {
    state_ = State::kConnecting;
    const bool ok = co_await connect_once();
    ++attempts_;
    if (ok && !closed_) {
      if (backoff_.failures() > 0 || attempts_ > 1) {
        spdlog::info("link to {} shard {} is up again", server_.name, shard_);
      }
      state_ = State::kUp;
      ++times_up_;
      backoff_.reset();
      consecutive_timeouts_ = 0;
      last_heard_ns_ = last_sent_ns_ = monotonic_ns();
      flush();
      co_await read_loop();
    }
    drop_connection();
    queued_.clear();
    if (closed_) break;
    state_ = State::kDown;
    fail_all(client::Status::kUnavailable);
    retry_timer_.expires_after(backoff_.next());
    co_await retry_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  state_ = State::kClosed;
  finished_ = true;
}

asio::awaitable<bool> HashLink::connect_once() {
  HostPort hp;
  try {
    hp = parse_host_port(server_.address, "address of " + server_.name);
  } catch (const std::exception& e) {
    spdlog::error("link to {}: {}", server_.name, e.what());
    co_return false;
  }
  asio::steady_timer deadline(ctx_, settings_.connect_timeout);
  tcp::resolver resolver(ctx_);
  auto resolved = co_await (resolver.async_resolve(hp.host, std::to_string(hp.port),
                                                   asio::as_tuple(asio::use_awaitable)) ||
                            deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (resolved.index() != 0 || std::get<0>(std::get<0>(resolved))) co_return false;
  const auto endpoints = std::get<1>(std::get<0>(resolved));

  tls_.reset();  // a write still in flight on the last connection holds it until it completes
  socket_ = tcp::socket(ctx_);
  auto connected =
      co_await (asio::async_connect(socket_, endpoints, asio::as_tuple(asio::use_awaitable)) ||
                deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (connected.index() != 0 || std::get<0>(std::get<0>(connected))) {
    if (backoff_.failures() == 0) {
      spdlog::warn("link to {} ({}) shard {}: cannot connect", server_.name, server_.address,
                   shard_);
    }
    co_return false;
  }
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);

  // The handshake binds this connection to our shard (and, with a cluster key, proves each side
  // to the other); a frozen server answers nothing, so it is under the same deadline.
  const bool keyed = !settings_.cluster_key.empty();
  link_auth::Transcript transcript{.link = "hash",
                                   .client_role = to_string(settings_.role),
                                   .client_name = settings_.client_name,
                                   .server_name = server_.name};
  Request hello{.type = FrameType::kHello, .protocol_version = kProtocolVersion};
  hello.shard = static_cast<uint16_t>(shard_);
  hello.name = settings_.client_name;
  if (keyed) {
    const auto nonce = link_auth::make_nonce();
    if (!nonce) {
      spdlog::error("link to {}: OpenSSL could not make a nonce", server_.name);
      co_return false;
    }
    transcript.client_nonce = *nonce;
    hello.flags = kFlagAuth;
    hello.role = settings_.role;
    hello.auth = std::string_view(reinterpret_cast<const char*>(nonce->data()), nonce->size());
  }
  const bool tls = settings_.tls != nullptr;
  if (tls) hello.flags |= kFlagTls;
  std::vector<uint8_t> out;
  append_request(hello, out);
  // Writes `out` on `stream` (the socket, or the TLS stream over it) under the deadline.
  auto send_on = [&](auto& stream) -> asio::awaitable<bool> {
    auto wrote = co_await (
        asio::async_write(stream, asio::buffer(out), asio::as_tuple(asio::use_awaitable)) ||
        deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    co_return wrote.index() == 0 && !std::get<0>(std::get<0>(wrote));
  };
  auto send = [&]() { return send_on(socket_); };
  if (!co_await send()) co_return false;

  StreamBuffer in(4 + kMaxFrameLength);
  std::vector<uint8_t> answer_bytes;  // the answer's body, copied out of `in`
  // Reads the answer to the handshake frame of type `type` into `r` (its strings point into
  // answer_bytes); false if none came in time or it is not one.
  auto read_answer_on = [&](auto& stream, FrameType type, Response& r) -> asio::awaitable<bool> {
    for (;;) {
      int verdict = -1;  // -1: need more, 0: not an answer of that type, 1: one
      const DecodeStatus st = drain_frames(in, [&](const Header& h, std::span<const uint8_t> body) {
        verdict = 0;
        answer_bytes.assign(body.begin(), body.end());
        if (h.type == type && decode_response(h, answer_bytes, r) == DecodeStatus::kOk) {
          verdict = 1;
        }
        return false;
      });
      if (verdict >= 0) co_return verdict == 1;
      if (st != DecodeStatus::kNeedMore) co_return false;
      const auto space = in.space();
      auto got = co_await (stream.async_read_some(asio::buffer(space.data(), space.size()),
                                                  asio::as_tuple(asio::use_awaitable)) ||
                           deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
      if (got.index() != 0 || std::get<0>(std::get<0>(got))) co_return false;
      in.commit(std::get<1>(std::get<0>(got)));
    }
  };
  auto read_answer = [&](FrameType type, Response& r) { return read_answer_on(socket_, type, r); };

  Response r;
  if (!co_await read_answer(FrameType::kHello, r)) co_return false;
  if (r.status != FrameStatus::kOk) {
    const char* why = "";
    if (r.status == FrameStatus::kUnauthorized) {
      why = keyed ? (tls ? " (our proof of the cluster key was not accepted)"
                         : " (the server wants TLS, or our proof of the cluster key was not "
                           "accepted)")
                  : " (the server wants a cluster key or TLS: set --cluster-key-file, or "
                    "--tls-cert, --tls-key, --tls-ca)";
    } else if (r.status == FrameStatus::kUnsupported && tls) {
      why = " (the server has no TLS and we have --tls-cert: not using it in the clear)";
    }
    spdlog::error("link to {} ({}) shard {}: handshake refused: {}{}", server_.name,
                  server_.address, shard_, to_string(r.status), why);
    co_return false;
  }
  if (tls && !(r.flags & kFlagTls)) {
    spdlog::error(
        "link to {} ({}) shard {}: refused: the server does not offer TLS (an older version?); "
        "not using it in the clear",
        server_.name, server_.address, shard_);
    co_return false;
  }
  peer_timed_ = (r.flags & kFlagTimed) != 0;
  if (r.shard_count != server_.shards) {
    spdlog::error("link to {}: the table says {} shards, the server has {}", server_.name,
                  server_.shards, r.shard_count);
    co_return false;
  }
  if (keyed) {
    const bool has_proof = (r.flags & kFlagAuth) && r.auth.size() == kHelloAuthResponseSize;
    if (has_proof) {
      std::copy_n(r.auth.begin(), link_auth::kNonceSize, transcript.server_nonce.begin());
    }
    // Without a proof r.auth may be empty, its data() null: no offset is applied to it.
    const auto server_proof =
        has_proof
            ? std::span(reinterpret_cast<const uint8_t*>(r.auth.data()) + link_auth::kNonceSize,
                        link_auth::kProofSize)
            : std::span<const uint8_t>();
    if (!has_proof || !link_auth::verify(settings_.cluster_key, link_auth::Side::kServer,
                                         transcript, server_proof)) {
      ++auth_failures_;
      settings_.refused_handshakes->fetch_add(1, std::memory_order_relaxed);
      spdlog::error(
          "link to {} ({}) shard {}: refused: the server {} the cluster key as {}; "
          "not using it",
          server_.name, server_.address, shard_,
          has_proof ? "did not prove" : "offered no proof of", server_.name);
      co_return false;
    }
    const auto proof =
        link_auth::prove(settings_.cluster_key, link_auth::Side::kClient, transcript);
    if (!proof) co_return false;
    Request auth{.type = FrameType::kAuth};
    auth.auth = std::string_view(reinterpret_cast<const char*>(proof->data()), proof->size());
    out.clear();
    append_request(auth, out);
    if (!co_await send()) co_return false;
    Response ar;
    if (!co_await read_answer(FrameType::kAuth, ar)) co_return false;
    if (ar.status != FrameStatus::kOk) {
      spdlog::error(
          "link to {} ({}) shard {}: our proof of the cluster key was refused (a "
          "different key?)",
          server_.name, server_.address, shard_);
      co_return false;
    }
  }
  // Anything after the handshake's answers would be an answer to a request we have not sent.
  if (!in.empty()) co_return false;
  if (!tls) co_return true;

  // TLS, under the same deadline: the server must present a certificate our CA signed. In TLS 1.3
  // the server judges our certificate after our side of the handshake is done, so one PING
  // answered over TLS is what shows that it accepted it before the link is called up.
  tls_ = std::make_shared<asio::ssl::stream<tcp::socket>>(std::move(socket_), *settings_.tls);
  auto shook = co_await (
      tls_->async_handshake(asio::ssl::stream_base::client, asio::as_tuple(asio::use_awaitable)) ||
      deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  std::string tls_failure;
  if (shook.index() != 0) {
    tls_failure = "the TLS handshake timed out";
  } else if (const auto failed = std::get<0>(std::get<0>(shook))) {
    tls_failure =
        failed.message() + " (is its certificate signed by another CA than our --tls-ca?)";
  } else {
    out.clear();
    append_request(Request{.type = FrameType::kPing}, out);
    Response pong;
    if (!co_await send_on(*tls_) || !co_await read_answer_on(*tls_, FrameType::kPing, pong) ||
        !in.empty()) {
      tls_failure =
          "the server closed the link after the TLS handshake (does it trust the CA of our "
          "certificate?)";
    }
  }
  if (!tls_failure.empty()) {
    settings_.refused_handshakes->fetch_add(1, std::memory_order_relaxed);
    spdlog::error("link to {} ({}) shard {}: TLS failed: {}", server_.name, server_.address, shard_,
                  tls_failure);
    co_return false;
  }
  co_return true;
}

asio::awaitable<void> HashLink::read_loop() {
  for (;;) {
    const auto space = in_.space();
    const auto buffer = asio::buffer(space.data(), space.size());
    auto [ec, n] =
        tls_ ? co_await tls_->async_read_some(buffer, asio::as_tuple(asio::use_awaitable))
             : co_await socket_.async_read_some(buffer, asio::as_tuple(asio::use_awaitable));
    if (ec || closed_) {
      if (!closed_ && ec != asio::error::operation_aborted) {
        spdlog::warn("link to {} shard {}: {}", server_.name, shard_, ec.message());
      }
      in_.consume(in_.data().size());
      co_return;
    }
    in_.commit(n);
    last_heard_ns_ = monotonic_ns();
    bool malformed = false;
    const DecodeStatus st = drain_frames(in_, [&](const Header& h, std::span<const uint8_t> body) {
      Response r;
      if (decode_response(h, body, r) != DecodeStatus::kOk) {
        malformed = true;
        return false;
      }
      if (const Sent* sent = pending_.find(h.correlation)) {
        const Sent answered = *sent;
        pending_.erase(h.correlation);
        consecutive_timeouts_ = 0;
        settle_before(answered.seq);
        if (answered.token != kKeepaliveToken) listener_.on_answer(answered.token, r);
      } else {
        // After the frame's deadline: its sender heard TIMEOUT, and it is unsettled (or a
        // keepalive, which nobody waits for).
        answer_unsettled(h.correlation, r);
      }
      return true;
    });
    if (malformed || st != DecodeStatus::kNeedMore) {
      spdlog::error("link to {} shard {}: malformed answer ({}), reconnecting", server_.name,
                    shard_, malformed ? "bad body" : to_string(st));
      in_.consume(in_.data().size());
      co_return;
    }
    listener_.after_link_io();
  }
}

}  // namespace imhash
