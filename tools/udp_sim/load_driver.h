// LoadDriver: runs one udp_sim load. It asks the UserModel for each next request, encodes it into
// an in-flight slot, sends it at the pace the config asks for (open loop: on a fixed schedule;
// closed loop: keeping the window full), batches sends and receives with sendmmsg/recvmmsg over
// the non-blocking sockets, matches replies by request_id (checking the echoed user_id and op),
// re-sends timed-out tries with the same request_id, and hands a progress line to the Reporter
// every second. A --warmup runs the same load first; its requests are sent, answered and given
// to the model, but no figure counts them (Slot::warmup), and progress lines start after it.
// With a HistoryLog (--history), every request that ends, warm-up or not, is added to it.
//
// One thread, one poll loop: no locks, and no allocation per request once constructed. When the
// duration is over or a signal arrives (`signals` counts SIGINT/SIGTERM), it sends nothing new,
// waits at most one more try timeout for the replies still due (a further signal cuts that short),
// and counts the rest as abandoned.
//
// Thread rules: construct and run() on one thread; `signals` is incremented by a signal handler.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tools/udp_sim/history_log.h"
#include "tools/udp_sim/in_flight.h"
#include "tools/udp_sim/pacer.h"
#include "tools/udp_sim/report.h"
#include "tools/udp_sim/sim_config.h"
#include "tools/udp_sim/stats.h"
#include "tools/udp_sim/token_source.h"
#include "tools/udp_sim/udp_sockets.h"
#include "tools/udp_sim/user_model.h"

namespace imhash::sim {

class LoadDriver {
 public:
  // `history`, when not null, receives every request as it ends.
  LoadDriver(const SimConfig& config, const UdpSockets& sockets, UserModel& model,
             Reporter& reporter, HistoryLog* history = nullptr);

  void run(const std::atomic<int>& signals);

  const Counters& counters() const { return counters_; }
  const Latencies& latencies() const { return *latencies_; }
  double elapsed_s() const { return elapsed_s_; }
  bool interrupted() const { return interrupted_; }

 private:
  static constexpr uint32_t kBatch = 64;        // datagrams per sendmmsg / recvmmsg
  static constexpr size_t kRecvBufSize = 2048;  // replies are <= 48 bytes; more is amplification

  // A socket's datagrams waiting for the kernel (normally empty after every loop turn; it holds
  // datagrams only while the socket's send buffer is full).
  struct SendQueue {
    struct Entry {
      uint32_t slot;
      uint32_t request_id;  // a stale entry (its request ended) is skipped
    };
    std::vector<Entry> ring;  // power-of-two size
    size_t head = 0;
    size_t tail = 0;
    bool blocked = false;  // EAGAIN: wait for POLLOUT
    size_t size() const { return tail - head; }
  };

  void issue(int64_t now);
  bool encode(Slot& s);
  void enqueue(uint32_t slot);
  void flush(size_t sock);
  void receive(size_t sock);
  // `arrived_ns`: when the datagram reached this host (its kernel timestamp), for its latency;
  // `read_ns`: when recvmmsg returned it, for the history.
  void on_datagram(const uint8_t* data, size_t len, bool truncated, int64_t arrived_ns,
                   int64_t read_ns);
  void expire(int64_t now, bool draining);
  // `now`: when the reply was read or udp_sim gave up on the request.
  void end_request(uint32_t slot, const client::Message* reply, bool abandoned, int64_t now);
  void record_history(const Slot& s, const client::Message* reply, int64_t now);
  int64_t wake_time(int64_t now, bool draining) const;

  // Constant after construction.
  const SimConfig& config_;
  const UdpSockets& sockets_;
  UserModel& model_;
  Reporter& reporter_;
  HistoryLog* history_;
  int64_t timeout_ns_;
  std::unique_ptr<TokenSource> tokens_;  // null without --auth-key-file

  InFlightTable table_;
  Counters counters_;
  std::unique_ptr<Latencies> latencies_;
  std::vector<SendQueue> queues_;
  std::vector<pollfd> pollfds_;

  OpenLoopSchedule schedule_{1, 0};
  uint64_t scheduled_ = 0;  // open loop: requests given a slot so far
  RunPhases phases_;
  bool warming_ = false;
  int64_t drain_end_ns_ = 0;  // while draining: give up on the rest from here on
  int64_t next_tick_ns_ = 0;  // next progress line
  double elapsed_s_ = 0;
  bool interrupted_ = false;

  // sendmmsg / recvmmsg scratch.
  std::vector<mmsghdr> tx_msgs_;
  std::vector<iovec> tx_iov_;
  std::vector<uint32_t> tx_slot_;
  std::vector<size_t> tx_next_;  // queue position after each batched entry
  std::vector<mmsghdr> rx_msgs_;
  std::vector<iovec> rx_iov_;
  std::vector<uint8_t> rx_buf_;
  std::vector<uint8_t> rx_control_;  // kReceiveControlSize per datagram: its arrival time
};

}  // namespace imhash::sim
