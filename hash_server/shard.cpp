#include "hash_server/shard.h"

#include <spdlog/spdlog.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <ctime>

#include "common/codec/endpoint.h"
#include "common/runtime/clock.h"

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace imhash {

using namespace frame;

namespace {

// Receive buffer: room for one maximal frame plus a full read's worth of pipelined requests.
constexpr size_t kReadBufferSize = 4 + kMaxFrameLength + 64 * 1024;

uint32_t unix_now() { return static_cast<uint32_t>(std::time(nullptr)); }

const char* purge_name(PurgeAction action) {
  return action == PurgeAction::kAll        ? "all"
         : action == PurgeAction::kNotOwned ? "not-owned"
                                            : "older-than";
}

}  // namespace

Shard::Shard(uint32_t index, uint32_t shard_count, std::string server_name,
             std::chrono::seconds idle_timeout, std::shared_ptr<asio::ssl::context> tls,
             Hooks hooks, uint64_t stream_rate, bool remember_deletes)
    : index_(index),
      idle_timeout_(idle_timeout),
      tls_(std::move(tls)),
      hooks_(std::move(hooks)),
      work_(ctx_.get_executor()),
      core_(index, shard_count, std::move(server_name),
            static_cast<double>(stream_rate) / shard_count, remember_deletes) {}

void Shard::start() {
  thread_ = std::thread([this] {
    thread_check_.bind();
    schedule_idle_sweep();
    ctx_.run();
  });
}

void Shard::join() {
  if (thread_.joinable()) thread_.join();
}

ShardHandle Shard::handle() { return ShardHandle(*this); }

// ---- what other threads may do: posted to the shard's thread -------------------------------

void ShardHandle::adopt(Shard::tcp::socket::protocol_type protocol,
                        Shard::tcp::socket::native_handle_type fd, std::vector<uint8_t> leftover,
                        ConnectionQuota::Ticket ticket) {
  asio::post(shard_->ctx_, [s = shard_, protocol, fd, leftover = std::move(leftover),
                            ticket = std::move(ticket)]() mutable {
    s->adopt(protocol, fd, std::move(leftover), std::move(ticket));
  });
}

void ShardHandle::set_router(std::shared_ptr<const Router> router,
                             std::chrono::milliseconds grace) {
  asio::post(shard_->ctx_, [s = shard_, router = std::move(router), grace]() mutable {
    s->set_router(std::move(router), grace);
  });
}

void ShardHandle::stop() {
  asio::post(shard_->ctx_, [s = shard_] { s->stop(); });
}

void ShardHandle::command_purge(PurgeAction action, uint32_t age_seconds, uint64_t id) {
  asio::post(shard_->ctx_,
             [s = shard_, action, age_seconds, id] { s->command_purge(action, age_seconds, id); });
}

void ShardHandle::command_stream(control::StreamAction action, uint64_t version,
                                 std::vector<std::string> lost) {
  asio::post(shard_->ctx_, [s = shard_, action, version, lost = std::move(lost)]() mutable {
    s->command_stream(action, version, std::move(lost));
  });
}

void ShardHandle::set_filling(bool filling) {
  asio::post(shard_->ctx_, [s = shard_, filling] { s->set_filling(filling); });
}

void ShardHandle::acknowledged(uint64_t generation, uint16_t records, std::string target,
                               bool link_lost) {
  asio::post(shard_->ctx_,
             [s = shard_, generation, records, target = std::move(target), link_lost] {
               s->acknowledged(generation, records, target, link_lost);
             });
}

void ShardHandle::stream_link_lost() {
  asio::post(shard_->ctx_, [s = shard_] { s->stream_link_lost(); });
}

void ShardHandle::snapshot(std::function<void(ShardSnapshot)> done) {
  asio::post(shard_->ctx_, [s = shard_, done = std::move(done)] { done(s->take_snapshot()); });
}

// ---- on the shard's thread -----------------------------------------------------------------

void Shard::adopt(tcp::socket::protocol_type protocol, tcp::socket::native_handle_type fd,
                  std::vector<uint8_t> leftover, ConnectionQuota::Ticket ticket) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  tcp::socket socket(ctx_, protocol, fd);
  if (stopping_) return;  // the socket closes as it goes out of scope
  if (tls_) {
    // The acceptor refused bytes pipelined behind a TLS handshake: `leftover` is empty.
    asio::co_spawn(ctx_, serve_tls(std::move(socket), std::move(ticket)), asio::detached);
    return;
  }
  asio::co_spawn(ctx_, serve(std::move(socket), std::move(leftover), std::move(ticket)),
                 asio::detached);
}

void Shard::set_router(std::shared_ptr<const Router> router, std::chrono::milliseconds grace) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  core_.set_router(
      std::move(router),
      static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(grace).count()),
      unix_now());
  apply_effects();
}

void Shard::command_purge(PurgeAction action, uint32_t age_seconds, uint64_t id) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  core_.command_purge(action, age_seconds, id);
  apply_effects();
}

void Shard::command_stream(control::StreamAction action, uint64_t version,
                           std::vector<std::string> lost) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  core_.command_stream(action, version, std::move(lost));
  apply_effects();
}

void Shard::set_filling(bool filling) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  core_.set_filling(filling);
}

void Shard::acknowledged(uint64_t generation, uint16_t records, const std::string& target,
                         bool link_lost) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  core_.acknowledged(generation, records, target, link_lost);
  apply_effects();
}

void Shard::stream_link_lost() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  core_.stream_link_lost();
  apply_effects();
}

void Shard::stop() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  stopping_ = true;
  core_.stop();
  stream_timer_.cancel();
  boost::system::error_code ec;
  // A pending read then completes with end-of-file; each connection writes what it owes and
  // closes.
  idle_timer_.cancel();
  for (Connection* c : connections_) c->socket->shutdown(tcp::socket::shutdown_receive, ec);
  work_.reset();
  // A peer that does not read its answers would hold its write (and so this thread) forever:
  // after the grace, close whatever is still open; pending writes then fail and end.
  if (!connections_.empty()) {
    stop_timer_.expires_after(kStopGrace);
    stop_timer_.async_wait([this](const boost::system::error_code& timer_ec) {
      if (timer_ec) return;
      if (!connections_.empty()) {
        spdlog::warn("shard {}: {} connection(s) still writing after {} s; closing them", index_,
                     connections_.size(), kStopGrace.count());
      }
      boost::system::error_code ignored;
      for (Connection* c : connections_) c->socket->close(ignored);
    });
  }
}

void Shard::apply_effects() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (!core_.has_effects()) return;
  const ShardCore::Effects e = core_.take_effects();
  for (const ShardEvent& ev : e.events) {
    switch (ev.kind) {
      case ShardEvent::kPurgeStarted:
        spdlog::info("shard {}: purge {} started ({} slots)", index_, purge_name(ev.action),
                     ev.count);
        break;
      case ShardEvent::kPurgeFinished:
        spdlog::info("shard {}: purge finished, {} records deleted", index_, ev.count);
        break;
      case ShardEvent::kStreamStarted:
        spdlog::info("shard {}: stream started against table version {} ({} records to examine)",
                     index_, ev.version, ev.count);
        break;
      case ShardEvent::kStreamCancelled:
        spdlog::info("shard {}: stream cancelled", index_);
        break;
      case ShardEvent::kStreamDone:
        spdlog::info("shard {}: stream done: {} records handed to their owners", index_, ev.count);
        break;
      case ShardEvent::kStreamResent:
        spdlog::warn("shard {}: a link broke during the stream; sending everything again", index_);
        break;
      case ShardEvent::kStreamLinkLost:
        spdlog::warn("shard {}: a stream link was lost; sending everything again", index_);
        break;
    }
  }
  if (e.drop_older && hooks_.drop_older) hooks_.drop_older(index_, *e.drop_older);
  if (e.changed) notify_change();
  if (e.purge_step) schedule_purge_step();
  if (e.stream_step) schedule_stream_step();
}

void Shard::schedule_idle_sweep() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (idle_timeout_.count() <= 0 || stopping_) return;
  idle_timer_.expires_after(std::max(std::chrono::seconds(1), idle_timeout_ / 4));
  idle_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    const uint32_t now = unix_now();
    core_.tick(now);
    boost::system::error_code ignored;
    for (Connection* c : connections_) {
      if (now <= c->last_active_s ||
          now - c->last_active_s < static_cast<uint32_t>(idle_timeout_.count())) {
        continue;
      }
      spdlog::warn("shard {}: closing a connection silent for {} s (--idle-timeout)", index_,
                   now - c->last_active_s);
      c->socket->close(ignored);  // its pending read ends, and serve() with it
    }
    schedule_idle_sweep();
  });
}

asio::awaitable<void> Shard::serve_tls(tcp::socket socket, ConnectionQuota::Ticket ticket) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  boost::system::error_code ignored;
  std::string peer = "?";
  if (auto ep = socket.remote_endpoint(ignored); !ignored) {
    peer = format_host_port(ep.address().to_string(), ep.port());
  }
  asio::ssl::stream<tcp::socket> stream(std::move(socket), *tls_);
  asio::steady_timer deadline(ctx_, kTlsHandshakeTimeout);
  auto done = co_await (
      stream.async_handshake(asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable)) ||
      deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  const boost::system::error_code ec =
      done.index() == 0 ? std::get<0>(std::get<0>(done)) : asio::error::timed_out;
  if (ec) {
    ++core_.counters().tls_failures;
    spdlog::warn("shard {}: TLS handshake with {} failed: {}", index_, peer, ec.message());
    co_return;
  }
  if (stopping_) co_return;
  ++tls_connections_;
  co_await serve(std::move(stream), {}, std::move(ticket));
  --tls_connections_;
}

template <typename Stream>
asio::awaitable<void> Shard::serve(Stream stream, std::vector<uint8_t> leftover,
                                   ConnectionQuota::Ticket ticket) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  const ConnectionQuota::Ticket held = std::move(ticket);  // released as serve() ends
  auto& socket = stream.lowest_layer();
  Connection conn{&socket, unix_now()};
  connections_.insert(&conn);
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  StreamBuffer in(kReadBufferSize);
  in.append(leftover);
  leftover = {};
  std::vector<uint8_t> out;
  out.reserve(64 * 1024);
  std::string peer;
  if (auto ep = socket.remote_endpoint(ignored); !ignored) {
    peer = format_host_port(ep.address().to_string(), ep.port());
  }

  bool yield = false;
  for (;;) {
    // Answer every complete frame in the buffer, then send all answers with one write.
    bool malformed = false;
    // Bytes ahead (from the frame being handled) whose records are on their way.
    size_t prefetched = 0;
    DecodeStatus st;
    {
      const TurnTimer turn(turns_);  // one turn: this buffer's batch of requests
      const uint64_t now_ms = unix_millis();
      conn.last_active_s = static_cast<uint32_t>(now_ms / 1000);
      core_.set_serving_figures(connections_.size(), turns_.longest_ns);
      st = drain_frames(in, [&](const Header& h, std::span<const uint8_t> body) {
        if (prefetched == 0) prefetched = core_.prefetch_records(in.data());
        prefetched -= std::min(prefetched, size_t{4} + h.length);
        if (!core_.handle(h, body, out, now_ms)) {
          malformed = true;
          return false;
        }
        // A streamed batch is hundreds of records: let other connections' requests run before
        // the next one (below), so a stream never queues a burst of work ahead of them.
        if (h.type == FrameType::kImport) {
          yield = true;
          return false;
        }
        return true;
      });
    }
    apply_effects();  // a PURGE request starts a purge
    // kOk: the callback stopped early (to yield after an IMPORT); the stream is intact.
    const bool broken = malformed || (st != DecodeStatus::kNeedMore && st != DecodeStatus::kOk);
    if (broken) {
      ++core_.counters().bad_frames;
      spdlog::warn("shard {}: closing connection from {}: {}", index_, peer,
                   malformed ? "malformed request body" : to_string(st));
    }
    if (!out.empty()) {
      auto [ec, n] = co_await asio::async_write(stream, asio::buffer(out),
                                                asio::as_tuple(asio::use_awaitable));
      out.clear();
      if (ec) break;
    }
    if (broken) break;
    if (yield) {
      yield = false;
      co_await asio::post(ctx_, asio::use_awaitable);
      if (stopping_ && !socket.is_open()) break;
      if (!in.empty()) continue;  // the frames already read first
    }
    const auto space = in.space();
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(space.data(), space.size()),
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    in.commit(n);
  }
  connections_.erase(&conn);
  socket.close(ignored);
  if (stopping_ && connections_.empty()) stop_timer_.cancel();  // all done: no need to wait
}

ShardSnapshot Shard::take_snapshot() const {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  ShardSnapshot s;
  s.shard = index_;
  s.records = core_.store().size();
  s.memory_bytes = core_.store().memory_bytes();
  s.connections = connections_.size();
  s.tls_connections = tls_connections_;
  s.counters = core_.counters();
  s.purge = core_.purge_progress();
  s.purge_id = core_.purge_id();
  s.stream = core_.handoff().progress();
  s.stream_targets = core_.handoff().targets();
  s.stream_lost = core_.handoff().lost();
  s.tombstones = core_.tombstones();
  s.turns = turns_;
  return s;
}

void Shard::notify_change() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (hooks_.on_change) hooks_.on_change(take_snapshot());
}

void Shard::schedule_stream_step() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (stream_scheduled_ || stopping_) return;
  const ShardCore::StreamNext next = core_.next_stream_step(monotonic_ns());
  if (next.kind == ShardCore::StreamNext::kIdle) return;
  stream_scheduled_ = true;
  if (next.kind == ShardCore::StreamNext::kWait) {
    stream_timer_.expires_after(std::chrono::nanoseconds(next.wait_ns));
    stream_timer_.async_wait([this](const boost::system::error_code& ec) {
      stream_scheduled_ = false;
      if (!ec) schedule_stream_step();
    });
    return;
  }
  // Posted, like a purge step: requests already queued run first.
  asio::post(ctx_, [this] {
    stream_scheduled_ = false;
    stream_step();
  });
}

void Shard::stream_step() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (stopping_) return;
  std::vector<Handoff::Batch>* cut = nullptr;
  {
    const TurnTimer turn(turns_);
    cut = &core_.stream_step(unix_now());
  }
  for (Handoff::Batch& b : *cut) {
    if (hooks_.send_batch) hooks_.send_batch(index_, std::move(b));
  }
  apply_effects();  // the next step, or the stream's end
}

void Shard::schedule_purge_step() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (purge_scheduled_ || stopping_) return;
  purge_scheduled_ = true;
  // A posted step runs after the handlers already queued, so requests interleave with the purge.
  asio::post(ctx_, [this] {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    purge_scheduled_ = false;
    {
      const TurnTimer turn(turns_);
      core_.purge_step(unix_now());
    }
    apply_effects();  // the next step, or the purge's end
  });
}

}  // namespace imhash
