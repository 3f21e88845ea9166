#include "hash_server/shard.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <cassert>
#include <cstring>
#include <ctime>

#include "common/clock.h"
#include "common/endpoint.h"
#include "common/shard_map.h"

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace imhash {

using namespace frame;

namespace {

// Slots a purge examines per turn of the event loop: about 50 µs of work, so requests queued
// behind a purge step wait no longer than that.
constexpr size_t kPurgeBatchSlots = 4096;
// Receive buffer: room for one maximal frame plus a full read's worth of pipelined requests.
constexpr size_t kReadBufferSize = 4 + kMaxFrameLength + 64 * 1024;
// Frames whose records are prefetched before the first of them is handled: enough to overlap the
// misses of one pipelined batch, few enough that the slots are still cached when their turn comes.
constexpr size_t kPrefetchBatch = 32;
// Slots a stream step examines: like a purge step, tens of microseconds.
constexpr size_t kStreamStepSlots = 4096;
// IMPORT batches of one shard in flight at once: enough to keep the links busy (64 x 256
// records), few enough that a slow target holds little memory.
constexpr uint32_t kStreamWindow = 64;

uint32_t unix_now() { return static_cast<uint32_t>(std::time(nullptr)); }

}  // namespace

Shard::Shard(uint32_t index, uint32_t shard_count, std::string server_name,
             std::chrono::seconds idle_timeout, std::shared_ptr<asio::ssl::context> tls,
             Hooks hooks, uint64_t stream_rate)
    : index_(index),
      shard_count_(shard_count),
      server_name_(std::move(server_name)),
      idle_timeout_(idle_timeout),
      tls_(std::move(tls)),
      hooks_(std::move(hooks)),
      stream_rate_(static_cast<double>(stream_rate) / shard_count),
      work_(ctx_.get_executor()) {}

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

void Shard::adopt(tcp::socket::protocol_type protocol, tcp::socket::native_handle_type fd,
                  std::vector<uint8_t> leftover, ConnectionQuota::Ticket ticket) {
  asio::post(ctx_, [this, protocol, fd, leftover = std::move(leftover),
                    ticket = std::move(ticket)]() mutable {
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
  });
}

void Shard::schedule_idle_sweep() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (idle_timeout_.count() <= 0 || stopping_) return;
  idle_timer_.expires_after(std::max(std::chrono::seconds(1), idle_timeout_ / 4));
  idle_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    const uint32_t now = unix_now();
    now_ = std::max(now_, now);
    expire_tombstones();
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

void Shard::set_router(std::shared_ptr<const Router> router, std::chrono::milliseconds grace) {
  asio::post(ctx_, [this, router = std::move(router), grace]() mutable {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    const bool changed = !router_ || !router || router->version() != router_->version();
    router_ = std::move(router);
    self_index_ = router_ ? router_->table().server_index(server_name_) : -1;
    if (!changed) return;
    note_table_for_streams();
    // Ids may be moving: remember deletes until every login server has stopped reading the old
    // owners and streams have had time to arrive.
    const uint32_t now = unix_now();
    const auto grace_s =
        static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(grace).count());
    tombstone_until_ = std::max(tombstone_until_, now + grace_s + kTombstoneSlackS);
    forget_tombstones_not_held();
    if (handoff_.running()) {
      // Complete under the newest table: scan again against it.
      handoff_.start(router_, self_index_, store_, /*fresh=*/false, stream_history_, stream_lost_);
      if (hooks_.drop_older) hooks_.drop_older(index_, handoff_.generation());
      schedule_stream_step();
    } else {
      maybe_start_stream();
    }
  });
}

void Shard::stop() {
  asio::post(ctx_, [this] {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    stopping_ = true;
    purge_.cancel();
    handoff_.cancel();
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
    ++counters_.tls_failures;
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
      now_ = unix_now();
      conn.last_active_s = now_;
      st = drain_frames(in, [&](const Header& h, std::span<const uint8_t> body) {
        if (prefetched == 0) prefetched = prefetch_records(in.data());
        prefetched -= std::min(prefetched, size_t{4} + h.length);
        if (!handle(h, body, out)) {
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
    // kOk: the callback stopped early (to yield after an IMPORT); the stream is intact.
    const bool broken = malformed || (st != DecodeStatus::kNeedMore && st != DecodeStatus::kOk);
    if (broken) {
      ++counters_.bad_frames;
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

size_t Shard::prefetch_records(std::span<const uint8_t> frames) const {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  // The first frame is whole (drain_frames hands over only whole frames), so the size returned
  // covers at least it.
  // Two stages: every id's control group first, then (those lines arriving while the later ones
  // are asked for) exactly the slot lines each group's fingerprint matches. Loading the likely
  // slot lines blind fetched about twice the lines and measured 15-20% slower per lookup at 10M
  // records (docs/performance.md).
  std::array<uint64_t, kPrefetchBatch> ids;
  size_t count = 0;
  size_t offset = 0;
  for (size_t n = 0; n < kPrefetchBatch; ++n) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    if (next_frame(frames.subspan(offset), h, body, used) != DecodeStatus::kOk) break;
    if (const auto id = peek_request_id(h, body)) {
      store_.prefetch_group(*id);
      ids[count++] = *id;
    }
    offset += used;
  }
  for (size_t k = 0; k < count; ++k) store_.prefetch_record(ids[k]);
  return offset;
}

bool Shard::handle(const Header& h, std::span<const uint8_t> body, std::vector<uint8_t>& out) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  Request& q = request_;
  if (decode_request(h, body, q) != DecodeStatus::kOk) return false;
  Response r{.type = q.type,
             .correlation = q.correlation,
             .table_version = router_ ? router_->version() : 0};

  if (is_keyed(q.type)) {
    if (shard_of(q.id, shard_count_) != index_) {
      r.status = FrameStatus::kWrongShard;
      append_response(r, out);
      return true;
    }
    // MOVED only when our table is at least as new as the sender's: a sender with a newer table
    // knows better than we do, and kFlagAnyOwner (a fallback read, or deleting the old copy of a
    // user who logs out during a move) asks us on purpose.
    const bool any_owner = q.type != FrameType::kUpsert && (q.flags & kFlagAnyOwner) != 0;
    if (router_ && !any_owner && router_->version() >= q.table_version &&
        (self_index_ < 0 || !router_->holds(q.id, static_cast<uint32_t>(self_index_)) ||
         stale_replica_write(q))) {
      ++counters_.moved;
      r.status = FrameStatus::kMoved;
      append_response(r, out);
      return true;
    }
  }

  switch (q.type) {
    case FrameType::kHello:
    case FrameType::kAuth:
      r.status = FrameStatus::kBadRequest;  // the connection is already bound
      break;
    case FrameType::kUpsert: {
      ++counters_.upserts;
      const uint32_t seen = now_ >= q.age_seconds ? now_ - q.age_seconds : 0;
      if (q.flags & kFlagIfAbsent) {
        // A read repair copies the old owner's record; if the user logged out meanwhile, the
        // copy is stale and must not bring them back.
        if (deleted_in_move(q.id)) {
          ++counters_.repairs_skipped_deleted;
        } else {
          store_.insert_if_absent(q.id, q.endpoint.unmapped(), seen);
        }
      } else {
        if (!tombstones_.empty()) tombstones_.erase(q.id);  // logged in again
        store_.upsert(q.id, q.endpoint.unmapped(), seen);
      }
      break;
    }
    case FrameType::kGet: {
      ++counters_.gets;
      RecordStore::Record rec;
      // Being refilled (with replicas): not caught up. A record may still be on its way, and one
      // it holds (streamed, or written since it started) may be older than a write a login server
      // still holds for it; so every read goes to another copy until the config server says it
      // is filled. Without a table yet, only a miss is in doubt. A fallback read (any owner) asks
      // what this server holds.
      const bool not_caught_up = filling_ && (q.flags & kFlagAnyOwner) == 0;
      if (not_caught_up && router_ && router_->replicas() > 1) {
        ++counters_.not_ready;
        r.status = FrameStatus::kNotReady;
      } else if (store_.get(q.id, rec)) {
        r.endpoint = rec.endpoint;
        r.age_seconds = now_ >= rec.last_seen ? now_ - rec.last_seen : 0;
      } else if (not_caught_up && !router_) {
        ++counters_.not_ready;
        r.status = FrameStatus::kNotReady;
      } else {
        r.status = FrameStatus::kNotFound;
      }
      break;
    }
    case FrameType::kDelete:
      ++counters_.deletes;
      remember_delete(q.id, q);
      if (!store_.erase(q.id)) r.status = FrameStatus::kNotFound;
      break;
    case FrameType::kImport:
      handle_import(q);
      break;
    case FrameType::kStats:
      fill_stats(r);
      break;
    case FrameType::kPurge:
      handle_purge(q, r);
      break;
    case FrameType::kPing:
      break;
  }
  append_response(r, out);
  return true;
}

void Shard::handle_purge(const Request& q, Response& r) {
  start_purge(q.purge, q.age_seconds, 0);
  r.purge = purge_.progress();
}

bool Shard::placed_elsewhere(uint64_t id, uint64_t sender_version) const {
  return router_ && router_->version() >= sender_version &&
         (self_index_ < 0 || !router_->holds(id, static_cast<uint32_t>(self_index_)));
}

void Shard::remember_delete(uint64_t id, const Request& q) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  // The old copy of a user who logs out during a move (kFlagAnyOwner), deleted here while a table
  // at least as new as the sender's places the id elsewhere: the owner remembers that delete. Were
  // it remembered here too, a later table moving the id back would have this shard drop the
  // record the owner streams to it — a login made there after this delete.
  if (placed_elsewhere(id, q.table_version)) return;
  // A sender with a newer table than ours announces a change we have not installed yet: ids may
  // be on their way to us already.
  if (router_ && q.table_version > router_->version()) {
    tombstone_until_ = std::max(tombstone_until_, now_ + kTombstoneSlackS);
  }
  if (now_ >= tombstone_until_) {
    expire_tombstones();
    return;
  }
  if (tombstones_.size() >= kMaxTombstones && !tombstones_.count(id)) {
    ++counters_.tombstones_dropped;
    return;
  }
  tombstones_.insert(id);
}

void Shard::forget_tombstones_not_held() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  // A tombstone guards the owner's store. Once the id is placed elsewhere, its owner there has
  // taken every later write; if the id comes back, what comes with it is newer than this delete.
  std::erase_if(tombstones_, [this](uint64_t id) { return placed_elsewhere(id, 0); });
}

void Shard::expire_tombstones() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (now_ >= tombstone_until_ && !tombstones_.empty()) {
    std::unordered_set<uint64_t>().swap(tombstones_);  // give the memory back
  }
}

void Shard::handle_import(const Request& q) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  // Records are arriving: keep remembering deletes a while after the last batch.
  tombstone_until_ = std::max(tombstone_until_, now_ + kTombstoneSlackS);
  // Decoded a few records ahead, so each one's slot is prefetched before it is needed (a batch
  // lands all over a large table: each record is a cache miss otherwise).
  constexpr size_t kAhead = 8;
  std::array<ImportRecord, kAhead> ring;
  std::string_view records = q.records;
  size_t decoded = 0, applied = 0;
  auto decode_next = [&] {
    if (!next_import_record(records, ring[decoded % kAhead])) return false;
    store_.prefetch(ring[decoded % kAhead].id);
    ++decoded;
    return true;
  };
  while (decoded < kAhead && decode_next()) {
  }
  while (applied < decoded) {
    const ImportRecord rec = ring[applied % kAhead];
    ++applied;
    decode_next();
    if (shard_of(rec.id, shard_count_) != index_) {
      ++counters_.import_wrong_shard;
      continue;
    }
    // Cut under a table no newer than ours, which places the id elsewhere: a batch of a move
    // that was overtaken (the source scans again under the newer table and still holds the
    // record). Stored here, a fallback read could find a copy older than a logout.
    if (placed_elsewhere(rec.id, q.table_version == 0 ? UINT64_MAX : q.table_version)) {
      ++counters_.import_not_held;
      continue;
    }
    if (deleted_in_move(rec.id)) {
      ++counters_.import_skipped_deleted;
      continue;
    }
    const uint32_t seen = now_ >= rec.age_seconds ? now_ - rec.age_seconds : 0;
    // A write that reached us directly (a login after the change) is at least as new as any copy
    // streamed from the old owner.
    if (store_.upsert_if_newer(rec.id, rec.endpoint.unmapped(), seen) ==
        RecordStore::Merge::kKeptNewer) {
      ++counters_.import_skipped_newer;
    } else {
      ++counters_.imported;
    }
  }
}

void Shard::start_purge(PurgeAction action, uint32_t age_seconds, uint64_t id) {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (action == PurgeAction::kCancel) {
    purge_.cancel();
    notify_change();
  } else if (action != PurgeAction::kStatus) {
    purge_.start(action, age_seconds, store_);
    purge_id_ = id;
    notify_change();
    spdlog::info("shard {}: purge {} started ({} slots)", index_,
                 action == PurgeAction::kAll        ? "all"
                 : action == PurgeAction::kNotOwned ? "not-owned"
                                                    : "older-than",
                 purge_.progress().total);
    schedule_purge_step();
  }
}

void Shard::command_purge(PurgeAction action, uint32_t age_seconds, uint64_t id) {
  asio::post(ctx_, [this, action, age_seconds, id] { start_purge(action, age_seconds, id); });
}

ShardSnapshot Shard::take_snapshot() const {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  ShardSnapshot s;
  s.shard = index_;
  s.records = store_.size();
  s.memory_bytes = store_.memory_bytes();
  s.connections = connections_.size();
  s.tls_connections = tls_connections_;
  s.counters = counters_;
  s.purge = purge_.progress();
  s.purge_id = purge_id_;
  s.stream = handoff_.progress();
  s.stream_targets = handoff_.targets();
  s.stream_lost = handoff_.lost();
  s.tombstones = tombstones_.size();
  s.turns = turns_;
  return s;
}

void Shard::notify_change() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (hooks_.on_change) hooks_.on_change(take_snapshot());
}

void Shard::snapshot(std::function<void(ShardSnapshot)> done) {
  asio::post(ctx_, [this, done = std::move(done)] { done(take_snapshot()); });
}

void Shard::set_filling(bool filling) {
  asio::post(ctx_, [this, filling] {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    filling_ = filling;
  });
}

void Shard::command_stream(control::StreamAction action, uint64_t version,
                           std::vector<std::string> lost) {
  asio::post(ctx_, [this, action, version, lost = std::move(lost)]() mutable {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    if (stopping_) return;
    if (action == control::StreamAction::kStart) {
      for (std::string& name : lost) {
        if (std::find(stream_lost_.begin(), stream_lost_.end(), name) == stream_lost_.end())
          stream_lost_.push_back(std::move(name));
      }
    }
    if (action == control::StreamAction::kCancel) {
      stream_wanted_ = 0;
      if (!handoff_.running()) return;
      handoff_.cancel();
      if (hooks_.drop_older) hooks_.drop_older(index_, handoff_.generation());
      spdlog::info("shard {}: stream cancelled", index_);
      notify_change();
      return;
    }
    stream_wanted_ = std::max<uint64_t>(version, 1);
    maybe_start_stream();
  });
}

void Shard::maybe_start_stream() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (stream_wanted_ == 0 || stopping_) return;
  // Without a table this server owns every id: nothing to move, and nothing to wait for unless a
  // version was named.
  const uint64_t have = router_ ? router_->version() : 0;
  if (have < stream_wanted_ && router_) return;  // starts when that table arrives
  if (!router_ && stream_wanted_ > 1) return;
  stream_wanted_ = 0;
  handoff_.start(router_, self_index_, store_, /*fresh=*/true, stream_history_, stream_lost_);
  if (hooks_.drop_older) hooks_.drop_older(index_, handoff_.generation());
  spdlog::info("shard {}: stream started against table version {} ({} records to examine)", index_,
               have, store_.size());
  notify_change();
  schedule_stream_step();
}

void Shard::acknowledged(uint64_t generation, uint16_t records, std::string target,
                         bool link_lost) {
  asio::post(ctx_, [this, generation, records, target = std::move(target), link_lost] {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    const bool was_scanning = handoff_.scanning();
    handoff_.acknowledged(generation, records, target, link_lost);
    if (!handoff_.running()) {
      stream_finished();
      return;
    }
    if (!was_scanning && handoff_.scanning()) {
      spdlog::warn("shard {}: a link broke during the stream; sending everything again", index_);
      if (hooks_.drop_older) hooks_.drop_older(index_, handoff_.generation());
    }
    schedule_stream_step();
  });
}

void Shard::stream_link_lost() {
  asio::post(ctx_, [this] {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    // Marks the running stream (one already done stays done: what it sent was acknowledged
    // before the link was lost, and the purge may be under way).
    if (handoff_.running())
      spdlog::warn("shard {}: a stream link was lost; sending everything again", index_);
    handoff_.link_lost();
  });
}

void Shard::note_table_for_streams() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (!router_) return;
  const bool first = !had_table_;
  had_table_ = true;
  if (first) {
    // Every record this shard will hold arrives under this table or a later one.
    if (store_.size() == 0) stream_history_ = {router_};
    return;
  }
  if (stream_history_.empty()) return;  // unknown until a stream completes
  if (stream_history_.size() >= kMaxStreamHistory) {
    stream_history_.clear();  // too many changes without a completed stream: send everything
    return;
  }
  stream_history_.push_back(router_);
}

void Shard::stream_finished() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  // Complete against its table: every member of each record's set under it has the record.
  if (handoff_.progress().state == Handoff::State::kDone && handoff_.router_ptr())
    stream_history_ = {handoff_.router_ptr()};
  if (handoff_.progress().state == Handoff::State::kDone) stream_lost_.clear();
  spdlog::info("shard {}: stream done: {} records handed to their owners", index_,
               handoff_.progress().acked);
  notify_change();
}

void Shard::schedule_stream_step() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (stream_scheduled_ || !handoff_.scanning() || stopping_) return;
  if (handoff_.progress().in_flight >= kStreamWindow) return;  // an acknowledgement resumes it
  if (stream_rate_ > 0) {
    const int64_t now = monotonic_ns();
    if (stream_refill_ns_ == 0) stream_refill_ns_ = now;
    // A bucket of 10 ms worth (at least one batch), refilled at the rate: the stream never sends
    // more than that in one burst.
    const double burst = std::max(stream_rate_ / 100, static_cast<double>(Handoff::kBatchRecords));
    stream_tokens_ = std::min(
        burst, stream_tokens_ + stream_rate_ * static_cast<double>(now - stream_refill_ns_) / 1e9);
    stream_refill_ns_ = now;
    if (stream_tokens_ < 0) {
      stream_scheduled_ = true;
      const auto wait = std::chrono::nanoseconds(
          static_cast<int64_t>(-stream_tokens_ / stream_rate_ * 1e9) + 1'000'000);
      stream_timer_.expires_after(wait);
      stream_timer_.async_wait([this](const boost::system::error_code& ec) {
        stream_scheduled_ = false;
        if (!ec) schedule_stream_step();
      });
      return;
    }
  }
  stream_scheduled_ = true;
  // Posted, like a purge step: requests already queued run first.
  asio::post(ctx_, [this] {
    stream_scheduled_ = false;
    stream_step();
  });
}

void Shard::stream_step() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (!handoff_.scanning() || stopping_) return;
  size_t cut = 0;
  {
    const TurnTimer turn(turns_);
    now_ = unix_now();
    cut = handoff_.step(store_, kStreamStepSlots, now_, cut_);
  }
  stream_tokens_ -= static_cast<double>(cut);
  for (Handoff::Batch& b : cut_) {
    if (hooks_.send_batch) hooks_.send_batch(index_, std::move(b));
  }
  cut_.clear();
  if (!handoff_.running()) {  // nothing was left to send
    stream_finished();
    return;
  }
  schedule_stream_step();
}

void Shard::schedule_purge_step() {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  if (purge_scheduled_ || !purge_.running() || stopping_) return;
  purge_scheduled_ = true;
  // A posted step runs after the handlers already queued, so requests interleave with the purge.
  asio::post(ctx_, [this] {
    IMHASH_ON_OWNER_THREAD(on_shard_thread());
    purge_scheduled_ = false;
    {
      const TurnTimer turn(turns_);
      now_ = unix_now();
      counters_.purged += purge_.step(store_, kPurgeBatchSlots, purge_context());
    }
    if (!purge_.running()) {
      spdlog::info("shard {}: purge finished, {} records deleted", index_,
                   purge_.progress().deleted);
      notify_change();
    }
    schedule_purge_step();
  });
}

Purge::Context Shard::purge_context() const {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  return Purge::Context{router_.get(), self_index_, now_};
}

void Shard::fill_stats(Response& r) const {
  IMHASH_ON_OWNER_THREAD(on_shard_thread());
  r.stat_count = kStatCount;
  r.stats[kStatRecords] = store_.size();
  r.stats[kStatMemoryBytes] = store_.memory_bytes();
  r.stats[kStatUpserts] = counters_.upserts;
  r.stats[kStatGets] = counters_.gets;
  r.stats[kStatDeletes] = counters_.deletes;
  r.stats[kStatMoved] = counters_.moved;
  r.stats[kStatPurged] = counters_.purged;
  r.stats[kStatConnections] = connections_.size();
  r.stats[kStatBadFrames] = counters_.bad_frames;
  r.stats[kStatLongestTurnNs] = turns_.longest_ns;
}

}  // namespace imhash
