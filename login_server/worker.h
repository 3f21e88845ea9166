// Worker: one login server thread (DESIGN §2, §5). It owns a SO_REUSEPORT UDP socket, its own
// io_context, and links to every shard of every hash server; datagrams are received and replies
// sent in batches (recvmmsg/sendmmsg), and the requests of one burst that go to one link leave in
// one write. Nothing is shared with other workers on the data path except immutable tables.
//
// Thread rules: construct, start() and join() on the main thread; set_router() and stop() from any
// thread (they post); everything else on the worker's thread.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "common/router.h"
#include "login_server/hash_link.h"
#include "login_server/rate_limiter.h"
#include "login_server/table_source.h"

namespace imhash {

struct WorkerCounters {
  uint64_t received = 0;
  uint64_t dropped[static_cast<size_t>(DropReason::kCount)] = {};
  uint64_t replies_by_status[8] = {};
  uint64_t forwarded = 0;
  uint64_t moved_retries = 0;
  uint64_t fallback_reads = 0;
  uint64_t fallback_hits = 0;
  uint64_t read_repairs = 0;
  uint64_t send_failures = 0;
  // Time from receiving a forwarded request to queueing its reply (not for PING and errors
  // answered at once). Bucket i counts latencies up to kLatencyBounds[i]; the last is above all.
  static constexpr double kLatencyBounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                              0.01,   0.025,   0.05,   0.1,   0.25};
  static constexpr size_t kLatencyBuckets = std::size(kLatencyBounds) + 1;
  uint64_t latency[kLatencyBuckets] = {};
  double latency_sum_s = 0;
  // Filled by snapshot(): links by state.
  uint32_t links_up = 0;
  uint32_t links_down = 0;

  // Adds another worker's counters (to sum a server's).
  WorkerCounters& operator+=(const WorkerCounters& o);
};

struct WorkerSettings {
  LinkSettings link;
  std::chrono::milliseconds tick{10};
  // How long the event loop keeps polling after its last event while busy (common/event_loop.h).
  std::chrono::microseconds idle_poll{0};
  // DESIGN §6. Empty: authentication off. Otherwise LOGIN/HEARTBEAT/LOGOUT need a TOKEN MACed
  // with this key (login_server --auth-key-file).
  std::vector<uint8_t> auth_key;
  // Per source address and per worker thread (see login_server/rate_limiter.h); rate 0: off.
  RateLimit rate_limit;
};

class Worker final : public LinkListener {
 public:
  Worker(uint32_t index, const WorkerSettings& settings, TableSource* tables);
  ~Worker();

  // Starts the thread serving `udp_fd` (a bound, non-blocking UDP socket; the worker owns it).
  void start(int udp_fd, boost::asio::ip::udp protocol);
  void join();
  void set_routing(std::shared_ptr<const RoutingState> routing);
  // Stops taking datagrams, answers what is in flight (at most one timeout), closes links.
  void stop();
  // Posts `done()` once every link has made its first connection attempt.
  void when_links_tried(std::function<void()> done);
  // Called on the worker's thread with each table version it starts serving.
  void on_commit(std::function<void(uint64_t version)> f) { on_commit_ = std::move(f); }
  // Copies the counters on the worker's thread and passes them to `done` there.
  void snapshot(std::function<void(WorkerCounters)> done);

 private:
  boost::asio::awaitable<void> receive_loop();
  void handle_datagram(const uint8_t* data, size_t size, const ClientAddr& from, int64_t now);
  void forward(InFlight request, int64_t now);
  void install(std::shared_ptr<const RoutingState> routing);
  // Makes the pending routing current once every link it needs has been tried.
  void try_commit();
  // The link to `server`/`shard` under any table still in use (current, or retired during the
  // grace period); null if none is up.
  HashLink* link_to(const ServerInfo& server, uint32_t shard);
  bool try_fallback_read(InFlight& request, int64_t now);
  // During grace periods: the owner of `id` under an earlier table (from index `from` on, newest
  // first) that differs from its owner now and is reachable; sets `from` to the index after it.
  HashLink* earlier_owner(uint64_t id, uint8_t& from, uint64_t& version, int64_t now);
  bool delete_old_copy(InFlight& request, int64_t now);
  void read_repair(const InFlight& request, const frame::Response& found, int64_t now);
  void fail(InFlight& request, client::Status status);
  void record_latency(const InFlight& request);
  void on_answer(InFlight& request, const frame::Response& response) override;
  void on_failure(InFlight& request, client::Status status) override;
  void after_link_io() override;
  void reply(const ClientAddr& to, const uint8_t* data, size_t size, client::Status status);
  void flush_replies();
  void flush_links();
  void schedule_tick();
  uint32_t in_flight() const;
  void check_links_tried();

  const uint32_t index_;
  const WorkerSettings& settings_;
  TableSource* const tables_;  // may be null (tests)

  boost::asio::io_context ctx_{1};
  std::optional<boost::asio::ip::udp::socket> udp_;
  boost::asio::steady_timer tick_timer_;
  std::thread thread_;

  // Owned by the worker thread.
  std::shared_ptr<const RoutingState> routing_;
  const Router* router_ = nullptr;  // routing_->current
  struct LinkGroup {
    std::string key;  // name|address|shards: a changed server gets new links
    std::vector<std::unique_ptr<HashLink>> shards;
  };
  std::vector<LinkGroup> groups_;                // indexed like router_->table().servers
  std::shared_ptr<const RoutingState> pending_;  // newer, waiting for its new links
  std::vector<LinkGroup> warming_;               // links opened for pending_
  // Links of servers no longer in the table: kept for fallback reads until the grace period ends,
  // then closed once idle and destroyed once finished().
  std::vector<std::unique_ptr<HashLink>> retired_;
  std::vector<InFlight> parked_;  // MOVED, waiting (bounded in time) for a newer table
  std::vector<HashLink*> dirty_;  // links with queued frames
  bool stopping_ = false;
  std::function<void()> links_tried_;
  std::function<void(uint64_t)> on_commit_;
  WorkerCounters counters_;
  std::unique_ptr<TokenMac> token_mac_;  // keyed once; null: authentication off
  RateLimiter limiter_;
  uint32_t unix_now_ = 0;  // wall clock seconds, read once per receive burst (token expiry)

  // Batched replies, sent with sendmmsg.
  static constexpr size_t kBatch = 64;
  struct OutSlot {
    ClientAddr to;
    uint8_t data[client::kMinDatagram];
    size_t size = 0;
  };
  std::array<OutSlot, kBatch> out_{};
  size_t out_count_ = 0;
};

}  // namespace imhash
