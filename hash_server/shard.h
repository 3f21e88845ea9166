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
#include "common/frame_protocol.h"
#include "common/router.h"
#include "common/thread_check.h"
#include "hash_server/purge.h"
#include "hash_server/record_store.h"
#include "hash_server/turn_stats.h"

namespace imhash {

struct ShardCounters {
  uint64_t upserts = 0, gets = 0, deletes = 0, moved = 0, purged = 0, bad_frames = 0;
  uint64_t tls_failures = 0;  // TLS handshakes that failed or timed out
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
  TurnStats turns;
};

class Shard {
 public:
  using tcp = boost::asio::ip::tcp;

  // `idle_timeout`: a connection that sends nothing for this long is closed (0: never). `tls`:
  // every adopted connection runs the TLS server handshake with it, then speaks frames over TLS
  // (null: plain TCP).
  Shard(uint32_t index, uint32_t shard_count, std::string server_name,
        std::chrono::seconds idle_timeout = std::chrono::seconds(0),
        std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
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
  void set_router(std::shared_ptr<const Router> router);
  // Stops reading from every connection, answers what was read, closes, and lets the thread end.
  // A peer that does not read its answers is cut off after kStopGrace, so the shard always ends.
  void stop();
  static constexpr std::chrono::seconds kStopGrace{2};
  // Starts or cancels a purge on this shard (from the config server, through the control thread).
  void command_purge(frame::PurgeAction action, uint32_t age_seconds);
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
  void start_purge(frame::PurgeAction action, uint32_t age_seconds);
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

  boost::asio::io_context ctx_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  ThreadCheck thread_check_;  // bound to thread_ as it starts

  // Owned by the shard thread.
  RecordStore store_;
  Purge purge_;
  bool purge_scheduled_ = false;
  std::shared_ptr<const Router> router_;
  int self_index_ = -1;
  uint32_t now_ = 0;  // Unix seconds, refreshed once per batch
  ShardCounters counters_;
  uint64_t tls_connections_ = 0;
  TurnStats turns_;
  std::unordered_set<Connection*> connections_;
  bool stopping_ = false;
  boost::asio::steady_timer stop_timer_{ctx_};
  boost::asio::steady_timer idle_timer_{ctx_};
};

}  // namespace imhash
