// HashLink: one persistent, pipelined TCP connection from a login worker to one shard of one hash
// server (DESIGN §2). Requests are queued as frames and written with one system call per burst;
// answers are matched by correlation id, in any order. The link reconnects with exponential
// back-off and jitter, and a link that stops answering without closing is marked down after a few
// consecutive timeouts, then probed (reconnect + HELLO) until it answers again. While it is down,
// the worker answers UNAVAILABLE at once.
//
// Not thread-safe: every method runs on the owning worker's thread.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/frame_protocol.h"
#include "common/routing_table.h"
#include "login_server/client_addr.h"
#include "login_server/pending_table.h"
#include "login_server/request_plan.h"

namespace imhash {

// A client request on its way through a hash server.
struct InFlight {
  enum class Stage : uint8_t {
    kFirst,      // sent under the worker's current table
    kFallback,   // a LOOKUP missed at the new owner: asking the owner under the previous table
    kRepair,     // copying a record found by a fallback read to its new owner (no client reply)
    kOldDelete,  // LOGOUT during the grace period: deleting the copy at the previous owner first,
                 // so no fallback read can find it once the client is told it logged out
    kNewDelete,  // ... then at the owner (as kFirst, without repeating the step above)
  };
  ClientAsk ask{};
  ClientAddr client{};
  frame::FrameType type = frame::FrameType::kPing;
  Stage stage = Stage::kFirst;
  bool retried = false;         // re-sent once after MOVED, under a newer table
  uint8_t flags = 0;            // frame flags (kFlagAnyOwner, kFlagIfAbsent)
  uint8_t earlier = 0;          // kFallback/kOldDelete: the next earlier table to consult
  uint32_t age_seconds = 0;     // kRepair: the age of the record copied
  int64_t parked_until_ns = 0;  // waiting for a newer table after MOVED
  int64_t received_ns = 0;      // when the client's datagram was read (for the latency histogram)
};

struct LinkSettings {
  std::chrono::milliseconds timeout{100};  // per request
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds backoff_initial{20};
  std::chrono::milliseconds backoff_max{2000};
  uint32_t max_in_flight = 4096;
  uint32_t down_after_timeouts = 3;
  std::string client_name = "login";
};

// What a link tells its worker.
class LinkListener {
 public:
  virtual void on_answer(InFlight& request, const frame::Response& response) = 0;
  virtual void on_failure(InFlight& request, client::Status status) = 0;
  // Called after a batch of answers or failures, so the worker can flush its replies.
  virtual void after_link_io() = 0;

 protected:
  ~LinkListener() = default;
};

class HashLink {
 public:
  enum class State : uint8_t { kConnecting, kUp, kDown, kClosed };

  HashLink(boost::asio::io_context& ctx, LinkListener& listener, const LinkSettings& settings,
           ServerInfo server, uint32_t shard, uint64_t seed);
  HashLink(const HashLink&) = delete;
  HashLink& operator=(const HashLink&) = delete;

  void start();
  // Fails every request in flight with UNAVAILABLE and closes for good.
  void close();

  State state() const { return state_; }
  bool up() const { return state_ == State::kUp; }
  bool full() const { return pending_.full(); }
  uint32_t in_flight() const { return pending_.size(); }
  // True once the first connection attempt has succeeded or failed.
  bool first_attempt_done() const { return attempts_ > 0; }
  // True when nothing of the link is pending in the io_context any more: safe to destroy.
  bool finished() const { return finished_ && !writing_; }
  const ServerInfo& server() const { return server_; }
  uint32_t shard() const { return shard_; }

  // Queues a request. Precondition: up() && !full(). Returns true if the link had nothing queued
  // (the caller should remember to flush() it).
  bool submit(InFlight request, uint64_t table_version, int64_t now_ns);
  // Writes everything queued with one system call (unless a write is already in progress; then the
  // queue goes out when it completes).
  void flush();
  // Expires requests past their deadline (TIMEOUT) and marks the link down after
  // `down_after_timeouts` consecutive ones.
  void tick(int64_t now_ns);

 private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<bool> connect_once();
  boost::asio::awaitable<void> read_loop();
  void fail_all(client::Status status);
  void drop_connection();

  boost::asio::io_context& ctx_;
  LinkListener& listener_;
  const LinkSettings& settings_;
  const ServerInfo server_;
  const uint32_t shard_;

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer retry_timer_;
  State state_ = State::kConnecting;
  bool closed_ = false;
  bool writing_ = false;
  uint32_t attempts_ = 0;
  uint32_t consecutive_timeouts_ = 0;
  Backoff backoff_;
  PendingTable<InFlight> pending_;
  std::vector<uint8_t> queued_;       // frames waiting for the next write
  std::vector<uint8_t> writing_buf_;  // frames being written
  std::vector<uint8_t> in_;
  bool finished_ = false;  // run() has returned
};

const char* to_string(HashLink::State s);

}  // namespace imhash
