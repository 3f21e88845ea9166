// Shard: one thread of a hash server, with its own io_context, its records, its purge and the
// connections bound to it by their handshake (docs/design.md §2). Nothing on the data path is
// shared with other shards: no mutex, no shared atomic counter.
//
// The shard's rules are its core (hash_server/shard_core.h); Shard is the adapter that owns the
// thread, the sockets and the timers, feeds the core and carries out what it returns.
//
// Thread rules: the constructor, start(), join() and handle() run on the main thread; other
// threads reach a shard only through a ShardHandle, whose every call posts to the shard's thread;
// everything else runs there (checked in debug builds).
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

#include "common/codec/frame_protocol.h"
#include "common/codec/thread_check.h"
#include "common/routing/control_protocol.h"
#include "common/routing/router.h"
#include "common/runtime/connection_quota.h"
#include "hash_server/handoff.h"
#include "hash_server/shard_core.h"
#include "hash_server/turn_stats.h"

namespace imhash {

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

class ShardHandle;

// The shard's thread, its io_context and its connections: the adapter around its ShardCore.
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
        uint64_t stream_rate = 0, bool remember_deletes = true);
  // A TLS handshake that has not completed after this long is dropped.
  static constexpr std::chrono::seconds kTlsHandshakeTimeout{5};
  // On stop, a peer that does not read its answers is cut off after this long.
  static constexpr std::chrono::seconds kStopGrace{2};
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // The main thread's: runs the shard's thread, and waits for it to end (after a stop).
  void start();
  void join();
  // What other threads may do to this shard.
  ShardHandle handle();

 private:
  friend class ShardHandle;
  // One bound connection, living in its serve() coroutine.
  struct Connection {
    tcp::socket::lowest_layer_type* socket = nullptr;  // the TCP socket (under TLS, if any)
    uint32_t last_active_s = 0;                        // when it last sent something
  };

  // ---- on the shard's thread (ShardHandle posts here) ----
  void adopt(tcp::socket::protocol_type protocol, tcp::socket::native_handle_type fd,
             std::vector<uint8_t> leftover, ConnectionQuota::Ticket ticket);
  void set_router(std::shared_ptr<const Router> router, std::chrono::milliseconds grace);
  void stop();
  void command_purge(frame::PurgeAction action, uint32_t age_seconds, uint64_t id);
  void command_stream(control::StreamAction action, uint64_t version,
                      std::vector<std::string> lost);
  void set_filling(bool filling);
  void acknowledged(uint64_t generation, uint16_t records, const std::string& target,
                    bool link_lost);
  void stream_link_lost();
  ShardSnapshot take_snapshot() const;

  // Serves frames over `stream`: a tcp::socket, or an ssl::stream over one (a template, so the
  // plain path makes no indirect call per read or write).
  template <typename Stream>
  boost::asio::awaitable<void> serve(Stream stream, std::vector<uint8_t> leftover,
                                     ConnectionQuota::Ticket ticket);
  // The TLS server handshake (under kTlsHandshakeTimeout), then serve() over the TLS stream.
  boost::asio::awaitable<void> serve_tls(tcp::socket socket, ConnectionQuota::Ticket ticket);
  // Every idle_timeout_ / 4: closes connections silent for idle_timeout_.
  void schedule_idle_sweep();
  // Carries out what the core asked for in its last calls (ShardCore::Effects).
  void apply_effects();
  void schedule_purge_step();
  void schedule_stream_step();
  void stream_step();
  void notify_change();
  bool on_shard_thread() const { return thread_check_.owned(); }

  // Constant after construction.
  const uint32_t index_;
  const std::chrono::seconds idle_timeout_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;
  const Hooks hooks_;

  boost::asio::io_context ctx_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  ThreadCheck thread_check_;  // bound to thread_ as it starts

  // Owned by the shard thread.
  ShardCore core_;
  bool purge_scheduled_ = false;
  bool stream_scheduled_ = false;
  boost::asio::steady_timer stream_timer_{ctx_};
  uint64_t tls_connections_ = 0;
  TurnStats turns_;
  std::unordered_set<Connection*> connections_;
  bool stopping_ = false;
  boost::asio::steady_timer stop_timer_{ctx_};
  boost::asio::steady_timer idle_timer_{ctx_};
};

// ShardHandle: what threads other than the shard's own may do to a shard. Every call posts to the
// shard's thread and returns at once (seastar's submit_to, dragonfly's ShardSet::Add): the type
// is the rule that no other thread touches a shard's state. Copyable; valid while the Shard lives.
class ShardHandle {
 public:
  explicit ShardHandle(Shard& shard) : shard_(&shard) {}

  // Takes over a connection whose handshake the acceptor completed; `leftover` holds bytes the
  // acceptor read past the handshake (a client may pipeline requests right behind its HELLO; none
  // with TLS, which starts after the handshake's answer). `ticket` counts the connection in the
  // listener's quota until it closes.
  void adopt(Shard::tcp::socket::protocol_type protocol, Shard::tcp::socket::native_handle_type fd,
             std::vector<uint8_t> leftover, ConnectionQuota::Ticket ticket = {});
  // Installs a table. `grace`: how long login servers may still read the old owners (the push's
  // grace_ms); deletes are remembered that long and more (ShardCore::set_router).
  void set_router(std::shared_ptr<const Router> router,
                  std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // Stops reading from every connection, answers what was read, closes, and lets the thread end.
  // A peer that does not read its answers is cut off after Shard::kStopGrace.
  void stop();
  // Starts or cancels a purge (from the config server, through the control thread).
  void command_purge(frame::PurgeAction action, uint32_t age_seconds, uint64_t id = 0);
  // Starts the outbound stream once the shard runs table `version` or newer, or cancels it.
  void command_stream(control::StreamAction action, uint64_t version,
                      std::vector<std::string> lost = {});
  // Replicas: NOT_READY for reads while being refilled (ShardCore::set_filling).
  void set_filling(bool filling);
  // The stream sender's acknowledgement of a batch.
  void acknowledged(uint64_t generation, uint16_t records, std::string target, bool link_lost);
  // A link the stream sends over was lost and made again: send everything again.
  void stream_link_lost();
  // Takes a snapshot on the shard's thread and passes it to `done` there; `done` must hand it back
  // to its own thread (post) itself.
  void snapshot(std::function<void(ShardSnapshot)> done);

 private:
  Shard* shard_;
};

}  // namespace imhash
