// Worker: one login server thread (docs/design.md, "The login server"). It owns a SO_REUSEPORT
// UDP socket, its own io_context, links to every shard of every hash server, and the request flow
// that decides what happens to each request (login_server/request_flow.h). The worker does the
// I/O: datagrams are received and replies sent in batches (recvmmsg/sendmmsg), the frames one
// burst puts on one link leave in one write, and the links are opened, kept and retired as tables
// change. Nothing is shared with other workers on the data path except immutable tables.
//
// Thread rules: construct, start() and join() on the main thread; set_routing(), stop(),
// when_links_tried() and snapshot() from any thread (they post); everything else on the worker's
// own thread (checked in debug builds).
#pragma once

#include <array>
#include <boost/asio.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "common/links/hash_link.h"
#include "login_server/login_counters.h"
#include "login_server/request_flow.h"
#include "login_server/routing_state.h"

namespace imhash {

struct WorkerSettings {
  LinkSettings link;
  FlowSettings flow;
  std::chrono::milliseconds tick{10};
  // How long the event loop keeps polling after its last event while busy
  // (common/runtime/event_loop.h).
  std::chrono::microseconds idle_poll{0};
};

class Worker final : public LinkListener, public LinkView {
 public:
  Worker(uint32_t index, const WorkerSettings& settings);
  ~Worker();

  // Starts the thread serving `udp_fd` (a bound, non-blocking UDP socket; the worker owns it).
  void start(int udp_fd, boost::asio::ip::udp protocol);
  void join();
  void set_routing(std::shared_ptr<const RoutingState> routing);
  // Stops taking datagrams, answers what is in flight (at most one timeout), closes links.
  void stop();
  // Calls `done()` once every link has made its first connection attempt and the newest table
  // given to set_routing() is in effect (its new links tried too).
  void when_links_tried(std::function<void()> done);
  // Called on the worker's thread with each table version it starts serving.
  void on_commit(std::function<void(uint64_t version)> f) { on_commit_ = std::move(f); }
  // Called on the worker's thread when a hash server has a newer table version than the worker;
  // whoever owns the table source fetches it (the worker itself does no file or table I/O).
  void on_stale(std::function<void(uint64_t version)> f) { on_stale_ = std::move(f); }
  // What snapshot() samples.
  struct Sample {
    LoginCounters counters;
    std::map<std::string, uint64_t> held_writes;  // RequestFlow::add_held_writes
  };
  // Copies the counters and held writes on the worker's thread and passes them to `done` there.
  void snapshot(std::function<void(Sample)> done);

  // LinkListener and LinkView: called by this worker's links and request flow.
  void on_answer(uint64_t token, const frame::Response& response) override;
  void on_failure(uint64_t token, client::Status status) override;
  void on_settled(uint64_t token) override;
  void on_lost(uint64_t token) override;
  void on_late_answer(uint64_t token, const frame::Response& response) override;
  void after_link_io() override;
  uint32_t room(const LinkTarget& target) const override;
  bool dialling(const LinkTarget& target) const override;

 private:
  // The links to every shard of one server; the server is shards.front()->server().
  struct LinkGroup {
    std::vector<std::unique_ptr<HashLink>> shards;
  };

  boost::asio::awaitable<void> receive_loop();
  void install(std::shared_ptr<const RoutingState> routing);
  // Makes the pending routing current once every link it needs has been tried.
  void try_commit();
  HashLink* link_for(const LinkTarget& target) const;
  // Carries out what the request flow decided (actions_), including what that causes in turn.
  void execute();
  void reply(const ClientAddr& to, const uint8_t* data, size_t size, client::Status status);
  void flush_replies();
  void flush_links();
  void schedule_tick();
  uint32_t links_in_flight() const;
  void check_links_tried();
  bool on_thread() const { return thread_check_.owned(); }

  const uint32_t index_;
  const WorkerSettings& settings_;

  boost::asio::io_context ctx_{1};
  std::optional<boost::asio::ip::udp::socket> udp_;
  boost::asio::steady_timer tick_timer_;
  std::thread thread_;
  ThreadCheck thread_check_;  // bound to thread_ when it starts

  // Owned by the worker thread.
  LoginCounters counters_;
  RequestFlow flow_;
  FlowActions actions_;
  bool executing_ = false;
  std::shared_ptr<const RoutingState> routing_;
  std::vector<LinkGroup> groups_;                // indexed like routing_->current's servers
  std::shared_ptr<const RoutingState> pending_;  // newer, waiting for its new links
  std::vector<LinkGroup> warming_;               // links opened for pending_
  uint64_t servers_run_ = 0;  // the newest table version a hash server's MOVED named
  // Links of servers no longer in the table: kept for fallback reads until the grace period ends,
  // then closed once idle and destroyed once finished().
  std::vector<std::unique_ptr<HashLink>> retired_;
  std::vector<HashLink*> dirty_;  // links with queued frames
  bool stopping_ = false;
  std::function<void()> links_tried_;
  std::function<void(uint64_t)> on_commit_;
  std::function<void(uint64_t)> on_stale_;

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
