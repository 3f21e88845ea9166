// Shard: one thread of a hash server, with its own io_context, its records, its purge and the
// connections bound to it by their handshake (docs/design.md §2). Nothing on the data path is
// shared with other shards: no mutex, no shared atomic counter.
//
// Thread rules: the constructor, start(), join() run on the main thread; adopt(), set_router() and
// stop() may be called from any thread (they post to the shard); everything else runs on the
// shard's own thread (checked in debug builds).
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/connection_quota.h"
#include "common/control_protocol.h"
#include "common/frame_protocol.h"
#include "common/router.h"
#include "common/thread_check.h"
#include "hash_server/handoff.h"
#include "hash_server/purge.h"
#include "hash_server/record_store.h"
#include "hash_server/turn_stats.h"

namespace imhash {

struct ShardCounters {
  uint64_t upserts = 0, gets = 0, deletes = 0, moved = 0, purged = 0, bad_frames = 0;
  uint64_t tls_failures = 0;  // TLS handshakes that failed or timed out
  // Streaming in: records stored from IMPORTs, and those skipped (the shard held a newer record,
  // the id was deleted during the move, or it belongs to another shard).
  uint64_t imported = 0, import_skipped_newer = 0, import_skipped_deleted = 0;
  uint64_t import_wrong_shard = 0;
  uint64_t import_not_held = 0;  // cut under a table no newer than ours, which places it elsewhere
  uint64_t repairs_skipped_deleted = 0;  // read repairs of ids deleted during a move
  uint64_t tombstones_dropped = 0;       // deletes not remembered: the tombstone set was full
  uint64_t not_ready = 0;                // GET misses answered NOT_READY while being refilled
};

// A copy of a shard's figures, taken on its thread and handed to the control thread.
struct ShardSnapshot {
  uint32_t shard = 0;
  uint64_t records = 0;
  uint64_t memory_bytes = 0;
  uint64_t connections = 0;
  uint64_t tls_connections = 0;  // of those, the ones over TLS
  ShardCounters counters;
  frame::PurgeProgress purge;
  uint64_t purge_id = 0;  // the config server's id of the purge in `purge` (0: none)
  Handoff::Progress stream;
  std::vector<std::pair<std::string, uint64_t>> stream_targets;  // records acked per target
  std::vector<std::string> stream_lost;  // the servers the stream refills (StreamCommand::lost)
  uint64_t tombstones = 0;
  TurnStats turns;
};

class Shard {
 public:
  using tcp = boost::asio::ip::tcp;

  // What the shard hands to its server's main thread. Each runs on the shard's thread and must
  // post its work to the main thread itself.
  struct Hooks {
    // A batch of the outbound stream, for the stream sender; it answers with acknowledged().
    std::function<void(uint32_t shard, Handoff::Batch)> send_batch;
    // The stream restarted or was cancelled: queued batches of older generations are moot.
    std::function<void(uint32_t shard, uint64_t generation)> drop_older;
    // A purge or the stream started or ended: a fresh snapshot, so reports never lag behind.
    std::function<void(ShardSnapshot)> on_change;
  };

  // `idle_timeout`: a connection that sends nothing for this long is closed (0: never). `tls`:
  // every adopted connection runs the TLS server handshake with it, then speaks frames over TLS
  // (null: plain TCP). `stream_rate`: records per second this shard streams out (0: no limit).
  Shard(uint32_t index, uint32_t shard_count, std::string server_name,
        std::chrono::seconds idle_timeout = std::chrono::seconds(0),
        std::shared_ptr<boost::asio::ssl::context> tls = nullptr, Hooks hooks = {},
        uint64_t stream_rate = 0);
  // A TLS handshake that has not completed after this long is dropped.
  static constexpr std::chrono::seconds kTlsHandshakeTimeout{5};
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  void start();
  void join();

  // Takes over a connection whose handshake the acceptor completed; `leftover` holds bytes the
  // acceptor read past the handshake (a client may pipeline requests right behind its HELLO; none
  // with TLS, which starts after the handshake's answer). `ticket` counts the connection in the
  // listener's quota until it closes.
  void adopt(tcp::socket::protocol_type protocol, tcp::socket::native_handle_type fd,
             std::vector<uint8_t> leftover, ConnectionQuota::Ticket ticket = {});
  // `grace`: how long login servers may still read the old owners (the push's grace_ms); deletes
  // are remembered that long (and kTombstoneSlack more) so no streamed copy or read repair brings
  // a logged-out user back.
  void set_router(std::shared_ptr<const Router> router,
                  std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  static constexpr uint32_t kTombstoneSlackS = 60;
  static constexpr size_t kMaxTombstones = size_t{1} << 20;
  // Stops reading from every connection, answers what was read, closes, and lets the thread end.
  // A peer that does not read its answers is cut off after kStopGrace, so the shard always ends.
  void stop();
  static constexpr std::chrono::seconds kStopGrace{2};
  // Starts or cancels a purge on this shard (from the config server, through the control thread).
  void command_purge(frame::PurgeAction action, uint32_t age_seconds, uint64_t id = 0);
  // Starts the outbound stream once the shard runs table `version` or newer (from the beginning,
  // if one runs), or cancels it.
  void command_stream(control::StreamAction action, uint64_t version,
                      std::vector<std::string> lost = {});
  // Replicas: while filling, a GET of an id this shard has no record of is answered NOT_READY (in
  // a table with replicas, or while it has no table at all).
  void set_filling(bool filling);
  // The stream sender's acknowledgement of a batch (any thread).
  void acknowledged(uint64_t generation, uint16_t records, std::string target, bool link_lost);
  // A link the stream sends over was lost and made again (any thread): send everything again.
  void stream_link_lost();
  // Takes a snapshot on the shard's thread and passes it to `done` there; `done` must hand it back
  // to its own thread (post) itself.
  void snapshot(std::function<void(ShardSnapshot)> done);

  uint32_t index() const { return index_; }

 private:
  // One bound connection, living in its serve() coroutine.
  struct Connection {
    tcp::socket::lowest_layer_type* socket = nullptr;  // the TCP socket (under TLS, if any)
    uint32_t last_active_s = 0;                        // now_ when it last sent something
  };
  // Serves frames over `stream`: a tcp::socket, or an ssl::stream over one (a template, so the
  // plain path makes no indirect call per read or write).
  template <typename Stream>
  boost::asio::awaitable<void> serve(Stream stream, std::vector<uint8_t> leftover,
                                     ConnectionQuota::Ticket ticket);
  // The TLS server handshake (under kTlsHandshakeTimeout), then serve() over the TLS stream.
  boost::asio::awaitable<void> serve_tls(tcp::socket socket, ConnectionQuota::Ticket ticket);
  // Every idle_timeout_ / 4: closes connections silent for idle_timeout_.
  void schedule_idle_sweep();
  // Prefetches the record slots of the keyed requests among the first frames of `frames` (up to
  // kPrefetchBatch); returns the size of the frames it looked at, 0 if the first is incomplete.
  size_t prefetch_records(std::span<const uint8_t> frames) const;
  // Decodes and answers one request; returns false when the frame is malformed (close the link).
  bool handle(const frame::Header& h, std::span<const uint8_t> body, std::vector<uint8_t>& out);
  void handle_purge(const frame::Request& q, frame::Response& r);
  void handle_import(const frame::Request& q);
  void start_purge(frame::PurgeAction action, uint32_t age_seconds, uint64_t id);
  // Deletes are remembered (tombstones) while a move may still bring the id back.
  void remember_delete(uint64_t id, const frame::Request& q);
  // Our table is at least as new as `sender_version` and does not place `id` on this server.
  bool placed_elsewhere(uint64_t id, uint64_t sender_version) const;
  // On a new table: tombstones of ids it places elsewhere go (their owner remembers its deletes).
  void forget_tombstones_not_held();
  bool deleted_in_move(uint64_t id) const {
    return !tombstones_.empty() && tombstones_.count(id) != 0;
  }
  void expire_tombstones();
  // With replicas, a write from a sender whose table is older than ours is answered MOVED even
  // when we hold the id: the sender fans the write out to the members of the id's set under its
  // table, and a member our table added would miss it. With one copy the owner check alone
  // does this (the old owner is not the owner). A sender without a table (version 0: a tool)
  // is taken at its word.
  bool stale_replica_write(const frame::Request& q) const {
    return router_->replicas() > 1 && q.table_version != 0 &&
           q.table_version < router_->version() &&
           (q.type == frame::FrameType::kUpsert || q.type == frame::FrameType::kDelete);
  }
  // Tables run since the last stream completed (handoff.h, Handoff::start's `history`).
  void note_table_for_streams();
  void maybe_start_stream();
  void schedule_stream_step();
  void stream_step();
  // The stream has nothing left to send or to be acknowledged: logs it and reports it.
  void stream_finished();
  void notify_change();
  ShardSnapshot take_snapshot() const;
  void fill_stats(frame::Response& r) const;
  void schedule_purge_step();
  Purge::Context purge_context() const;
  bool on_shard_thread() const { return thread_check_.owned(); }

  // Constant after construction.
  const uint32_t index_;
  const uint32_t shard_count_;
  const std::string server_name_;
  const std::chrono::seconds idle_timeout_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;
  const Hooks hooks_;
  const double stream_rate_;  // records per second, this shard's share (0: no limit)

  boost::asio::io_context ctx_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  ThreadCheck thread_check_;  // bound to thread_ as it starts

  // Owned by the shard thread.
  RecordStore store_;
  Purge purge_;
  uint64_t purge_id_ = 0;
  bool purge_scheduled_ = false;
  Handoff handoff_;
  uint64_t stream_wanted_ = 0;  // a stream start waiting for this table version (0: none)
  bool stream_scheduled_ = false;
  double stream_tokens_ = 0;  // the rate limit's bucket, in records
  int64_t stream_refill_ns_ = 0;
  boost::asio::steady_timer stream_timer_{ctx_};
  std::vector<Handoff::Batch> cut_;  // reused by stream steps
  // Ids deleted while records may still be streaming in (all forgotten at tombstone_until_).
  std::unordered_set<uint64_t> tombstones_;
  uint32_t tombstone_until_ = 0;  // deletes are remembered until then (Unix seconds)
  std::shared_ptr<const Router> router_;
  int self_index_ = -1;
  // The table the last stream completed against (or the first this shard ran, while its store
  // was empty), then every table run since: what a replica may be assumed to hold (Handoff).
  // Empty: unknown, a stream sends every record to every member of its set.
  std::vector<std::shared_ptr<const Router>> stream_history_;
  // Servers that lost their records (StreamCommand::lost): every stream sends them all they
  // should hold, until one completes.
  std::vector<std::string> stream_lost_;
  bool filling_ = false;  // set_filling
  static constexpr size_t kMaxStreamHistory = 16;
  bool had_table_ = false;
  uint32_t now_ = 0;  // Unix seconds, refreshed once per batch
  // The request being handled, reused: decode_request sets every field, and a Request built per
  // frame cost a 120-byte reset each time (handle is not re-entered).
  frame::Request request_;
  ShardCounters counters_;
  uint64_t tls_connections_ = 0;
  TurnStats turns_;
  std::unordered_set<Connection*> connections_;
  bool stopping_ = false;
  boost::asio::steady_timer stop_timer_{ctx_};
  boost::asio::steady_timer idle_timer_{ctx_};
};

}  // namespace imhash
