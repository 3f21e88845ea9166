#include "login_server/hash_link.h"

#include <spdlog/spdlog.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/clock.h"
#include "common/options.h"

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
constexpr size_t kReadBufferSize = 4 + kMaxFrameLength + 64 * 1024;

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
      in_(kReadBufferSize) {
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
  Request q = request;
  const int64_t deadline =
      now_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(settings_.timeout).count();
  q.correlation = pending_.insert(token, deadline);
  const bool was_empty = queued_.empty();
  append_request(q, queued_);
  return was_empty;
}

void HashLink::flush() {
  IMHASH_ON_OWNER_THREAD(on_thread());
  if (writing_ || queued_.empty() || state_ != State::kUp) return;
  writing_ = true;
  writing_buf_.swap(queued_);
  asio::async_write(socket_, asio::buffer(writing_buf_),
                    [this](const boost::system::error_code& ec, size_t) {
                      writing_ = false;
                      writing_buf_.clear();
                      if (ec) {
                        drop_connection();  // the read loop sees it and fails what is in flight
                        return;
                      }
                      flush();
                    });
}

void HashLink::tick(int64_t now_ns) {
  IMHASH_ON_OWNER_THREAD(on_thread());
  bool expired = false;
  pending_.expire(now_ns, [&](uint64_t token) {
    ++consecutive_timeouts_;
    expired = true;
    listener_.on_failure(token, client::Status::kTimeout);
  });
  if (expired) listener_.after_link_io();
  const int64_t silent_ns = now_ns - last_heard_ns_;
  if (state_ == State::kUp && consecutive_timeouts_ >= settings_.down_after_timeouts &&
      silent_ns >= std::chrono::nanoseconds(settings_.dead_after).count()) {
    spdlog::warn("link to {} shard {}: {} requests timed out and nothing came for {} ms, marking "
                 "it down",
                 server_.name, shard_, consecutive_timeouts_, silent_ns / 1'000'000);
    drop_connection();
  }
}

void HashLink::drop_connection() {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void HashLink::fail_all(client::Status status) {
  if (pending_.size() == 0) return;
  pending_.drain([&](uint64_t token) { listener_.on_failure(token, status); });
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
      backoff_.reset();
      consecutive_timeouts_ = 0;
      last_heard_ns_ = monotonic_ns();
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

  // The handshake binds this connection to our shard; a frozen server answers nothing, so it is
  // under the same deadline.
  Request hello{.type = FrameType::kHello, .protocol_version = kProtocolVersion};
  hello.shard = static_cast<uint16_t>(shard_);
  hello.name = settings_.client_name;
  std::vector<uint8_t> out;
  append_request(hello, out);
  auto wrote = co_await (
      asio::async_write(socket_, asio::buffer(out), asio::as_tuple(asio::use_awaitable)) ||
      deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (wrote.index() != 0 || std::get<0>(std::get<0>(wrote))) co_return false;

  StreamBuffer in(4 + kMaxFrameLength);
  for (;;) {
    int verdict = -1;  // -1: need more, 0: refused, 1: accepted
    const DecodeStatus st = drain_frames(in, [&](const Header& h, std::span<const uint8_t> body) {
      Response r;
      verdict = 0;
      if (h.type != FrameType::kHello || decode_response(h, body, r) != DecodeStatus::kOk) {
        return false;
      }
      if (r.status != FrameStatus::kOk) {
        spdlog::error("link to {} shard {}: handshake refused: {}", server_.name, shard_,
                      to_string(r.status));
        return false;
      }
      if (r.shard_count != server_.shards) {
        spdlog::error("link to {}: the table says {} shards, the server has {}", server_.name,
                      server_.shards, r.shard_count);
        return false;
      }
      verdict = 1;
      return false;
    });
    // Anything after the HELLO answer would be an answer to a request we have not sent.
    if (verdict >= 0) co_return verdict == 1 && in.empty();
    if (st != DecodeStatus::kNeedMore) co_return false;
    const auto space = in.space();
    auto got = co_await (
        socket_.async_read_some(asio::buffer(space.data(), space.size()),
                                asio::as_tuple(asio::use_awaitable)) ||
        deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (got.index() != 0 || std::get<0>(std::get<0>(got))) co_return false;
    in.commit(std::get<1>(std::get<0>(got)));
  }
}

asio::awaitable<void> HashLink::read_loop() {
  for (;;) {
    const auto space = in_.space();
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(space.data(), space.size()),
                                                    asio::as_tuple(asio::use_awaitable));
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
      if (const uint64_t* token = pending_.find(h.correlation)) {
        const uint64_t t = *token;
        pending_.erase(h.correlation);
        consecutive_timeouts_ = 0;
        listener_.on_answer(t, r);
      }
      // else: the answer came after the frame's deadline; its sender already heard TIMEOUT.
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
