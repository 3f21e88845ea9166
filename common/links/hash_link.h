// HashLink: one persistent, pipelined TCP connection (TLS over it with --tls-cert) from a login
// worker (or a hash server's stream sender) to one shard of one hash server (docs/design.md,
// "Links"; frames in docs/protocol.md). A correlation-id transport: it queues frames, writes
// everything queued with one system call per burst, matches answers to the caller's tokens in any
// order, and reports each frame's fate once — an answer, TIMEOUT when its deadline passes, or
// UNAVAILABLE when the connection is lost. It knows nothing of what the requests mean
// (login_server/request_flow.h does).
//
// A frame that timed out is not forgotten: until a frame sent after it on the same connection is
// answered (the hash server answers a connection's frames in order, so it was processed too) it
// is *unsettled* (its own late answer settles it too, and is reported: a MOVED one was not
// applied), and if the connection ends first it was *lost*: it may or may not have been applied. A
// login server holds such writes for their member again (docs/design.md §3, "Hints"). A dropped
// connection is aborted (RST), so nothing sent on it can reach the server after a newer
// connection's frames.
//
// It reconnects with exponential back-off and jitter. A connection that stays open but stops
// answering is marked down and probed (reconnect + HELLO) when it has gone silent: at least
// `down_after_timeouts` requests in a row timed out and nothing at all arrived for `dead_after`.
// A shard that is merely slow (one long turn of its event loop) keeps answering within that
// window, so its link stays up and only the requests that missed their deadline get TIMEOUT.
//
// Thread rules: every method runs on the owning worker's thread (checked in debug builds).
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/codec/frame_protocol.h"
#include "common/codec/stream_buffer.h"
#include "common/codec/thread_check.h"
#include "common/links/backoff.h"
#include "common/routing/pending_table.h"
#include "common/routing/routing_table.h"

namespace imhash {

struct LinkSettings {
  std::chrono::milliseconds timeout{100};  // per request
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds backoff_initial{20};
  std::chrono::milliseconds backoff_max{2000};
  uint32_t max_in_flight = 4096;
  // Down when this many requests in a row timed out and nothing arrived for `dead_after`.
  uint32_t down_after_timeouts = 3;
  std::chrono::milliseconds dead_after{1000};
  std::string client_name = "login";
  // Who dials: a login server, or a hash server streaming records (the proofs bind it).
  Role role = Role::kLogin;
  // --cluster-key-file: prove it to each hash server and make it prove it back; empty: no proof.
  std::vector<uint8_t> cluster_key;
  // --tls-cert, --tls-key, --tls-ca (common/runtime/tls_options.h): after the handshake's answers
  // each link runs TLS with this context (the server must present a certificate the CA signed);
  // null: plain TCP. A server that does not offer TLS is refused, never used in the clear.
  std::shared_ptr<boost::asio::ssl::context> tls;
  // An up link with nothing sent for this long sends a PING, so the hash server's idle timeout
  // never closes a link that is merely quiet, and a dead peer shows up without user traffic.
  std::chrono::milliseconds keepalive{10000};
  // Handshakes in which a hash server did not prove the cluster key (or failed TLS), over every
  // link of every worker: rare, so one shared atomic (imhash_login_link_refused_total).
  std::shared_ptr<std::atomic<uint64_t>> refused_handshakes =
      std::make_shared<std::atomic<uint64_t>>(0);
};

// What a link tells its worker, on the worker's thread. Never about kKeepaliveToken, the token of
// the link's own PINGs (a worker's tokens are a slot index below 2^32 - 1 plus a generation, so
// none equals it).
inline constexpr uint64_t kKeepaliveToken = ~uint64_t{0};
class LinkListener {
 public:
  virtual void on_answer(uint64_t token, const frame::Response& response) = 0;
  virtual void on_failure(uint64_t token, client::Status status) = 0;
  // Called after a batch of answers or failures, so the worker can flush what they caused.
  virtual void after_link_io() = 0;
  // A frame whose TIMEOUT was reported was processed after all (a later frame was answered) /
  // was lost with its connection, with nothing sent after it answered (it may have been applied
  // or not). Each timed-out frame gets one of the two, or neither if the link is destroyed.
  virtual void on_settled(uint64_t /*token*/) {}
  virtual void on_lost(uint64_t /*token*/) {}
  // A frame whose TIMEOUT was reported was answered after all, on the same connection: settled,
  // with the answer (a MOVED one says it was not applied).
  virtual void on_late_answer(uint64_t token, const frame::Response& /*response*/) {
    on_settled(token);
  }

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
  // Fails every frame in flight with UNAVAILABLE and closes for good.
  void close();

  State state() const { return state_; }
  bool up() const { return state_ == State::kUp; }
  bool full() const { return room() == 0; }
  // Up and not full: a frame submitted now is sent.
  bool can_send() const { return up() && !full(); }
  // How many frames submitted now are sent (0 unless can_send()).
  // Unsettled frames count against max_in_flight too: a server that stopped answering fills it.
  uint32_t room() const {
    const auto unsettled = static_cast<uint32_t>(unsettled_.size());
    const uint32_t left =
        settings_.max_in_flight > unsettled ? settings_.max_in_flight - unsettled : 0;
    return up() ? std::min(pending_.room(), left) : 0;
  }
  uint32_t in_flight() const { return pending_.size(); }
  uint32_t unsettled() const { return static_cast<uint32_t>(unsettled_.size()); }
  // True once the first connection attempt has succeeded or failed.
  bool first_attempt_done() const { return attempts_ > 0; }
  // True when nothing of the link is pending in the io_context any more: safe to destroy.
  bool finished() const { return finished_ && !writing_; }
  const ServerInfo& server() const { return server_; }
  uint32_t shard() const { return shard_; }
  uint64_t auth_failures() const { return auth_failures_; }
  // How many times a connection came up: a change means the link was lost and made again (the
  // peer may have restarted in between).
  uint64_t times_up() const { return times_up_; }
  // Whether the server said, in its answer to this connection's HELLO, that it understands timed
  // frames (frame::kFlagTimed); submit() sends the others untimed ones.
  bool peer_timed() const { return peer_timed_; }

  // Queues `request` (its correlation is the link's to choose); its fate is reported under
  // `token`. Precondition: can_send(). Returns true if the link had nothing queued (the caller
  // should remember to flush() it).
  bool submit(const frame::Request& request, uint64_t token, int64_t now_ns);
  // Writes everything queued with one system call (unless a write is already in progress; then the
  // queue goes out when it completes).
  void flush();
  // Expires frames past their deadline (TIMEOUT) and marks the link down when it went silent.
  void tick(int64_t now_ns);

 private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<bool> connect_once();
  boost::asio::awaitable<void> read_loop();
  void fail_all(client::Status status);
  void drop_connection();
  bool on_thread() const { return ctx_.get_executor().running_in_this_thread(); }

  boost::asio::io_context& ctx_;
  LinkListener& listener_;
  const LinkSettings& settings_;
  const ServerInfo server_;
  const uint32_t shard_;

  boost::asio::ip::tcp::socket socket_;
  // With TLS, the connection after its handshake: socket_ moved into it. Shared with a write in
  // flight, which may outlive the connection by one completion.
  std::shared_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls_;
  boost::asio::steady_timer retry_timer_;
  State state_ = State::kConnecting;
  bool closed_ = false;
  bool writing_ = false;
  uint32_t attempts_ = 0;
  uint32_t consecutive_timeouts_ = 0;
  int64_t last_heard_ns_ = 0;   // the last answer (or the connection coming up)
  int64_t last_sent_ns_ = 0;    // the last frame queued (or the connection coming up)
  uint64_t auth_failures_ = 0;  // handshakes in which the server did not prove the cluster key
  uint64_t times_up_ = 0;
  bool peer_timed_ = false;
  std::vector<uint8_t> untimed_records_;  // an IMPORT's records made ages for an older server
  Backoff backoff_;
  // A frame in flight: the caller's token, and its place in the connection's send order.
  struct Sent {
    uint64_t token = 0;
    uint64_t seq = 0;
    uint32_t correlation = 0;  // its frame's (an unsettled one's late answer is matched by it)
  };
  // An answer no frame in flight waits for: an unsettled frame's, reported as a late answer.
  void answer_unsettled(uint32_t correlation, const frame::Response& response);
  // Reports as settled every unsettled frame sent before `seq` (an answered frame's).
  void settle_before(uint64_t seq);
  PendingTable<Sent> pending_;        // correlation -> the frame
  std::deque<Sent> unsettled_;        // timed out, not yet settled or lost, in send order
  uint64_t sent_seq_ = 0;             // frames submitted so far
  std::vector<uint8_t> queued_;       // frames waiting for the next write
  std::vector<uint8_t> writing_buf_;  // frames being written
  StreamBuffer in_;
  bool finished_ = false;  // run() has returned
};

const char* to_string(HashLink::State s);

}  // namespace imhash
