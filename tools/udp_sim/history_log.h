// HistoryLog: the --history file, every request udp_sim made, for a checker that judges each
// answer against what was acknowledged before it (issue 33: a per-user register, linearizable).
//
// Format, version 1 (the checker's parser expects exactly this):
//   # imhash-history 1
//   # udp_sim target=127.0.0.1:7000 first_user=1 users=1000 seed=42 history_client=0 ...
//   <invoke_ns> <complete_ns> <op> <user_id> <status> <endpoint>
//   ...
// Lines starting with '#' are comments; fields are separated by one space. invoke_ns: the
// CLOCK_MONOTONIC time of the request's first send (its re-sends are the same request: one line);
// complete_ns: when udp_sim received its reply, or gave up on it (then status `none`). Both are
// taken so that the interval holds the real one: invoke before the first sendmmsg, complete after
// the recvmmsg that returned the reply. op: LOGIN, HEARTBEAT, LOOKUP or LOGOUT. status: the
// reply's (OK, NOT_FOUND, UNAVAILABLE, ...) or `none`. endpoint: LOGIN/HEARTBEAT the ENDPOINT the
// request carried, LOOKUP the one in the reply, as Endpoint::to_string() ("10.0.0.7:4242",
// "[2001:db8::1]:443"); `-` for none (LOGOUT, a LOOKUP without one). Lines are in order of
// completion, not of invocation.
//
// add() is on the driver's hot path: it copies a fixed 48-byte record into a chunk allocated
// ahead. A full chunk (kChunkRecords) goes to a writer thread, which formats it (~100 ns a record)
// and writes it in one piece, at nice +10 so that the load goes first on a busy machine. The
// send/receive loop neither formats nor makes a system call per request for the history (a
// hand-off wakes the writer once a chunk); memory stays at a few chunks however long the run,
// unless the writer cannot keep up (then one more chunk each hand-off).
//
// Thread rules: construct, add() and finish() on one thread (the driver's). The writer thread is
// internal: it touches the stream and the chunks handed to it, nothing else.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/codec/endpoint.h"
#include "tools/udp_sim/sim_config.h"

namespace imhash::sim {

struct HistoryRecord {
  int64_t invoke_ns = 0;
  int64_t complete_ns = 0;
  uint64_t user_id = 0;
  Endpoint endpoint;  // written (LOGIN, HEARTBEAT) or read (LOOKUP); not valid(): "-"
  client::Op op = client::Op::kLookup;
  bool answered = false;  // false: status `none`
  client::Status status = client::Status::kOk;
};

// "# imhash-history 1\n# <comment>\n".
std::string history_header(std::string_view comment);
// The settings a history's reader needs to know what made it (target, users, seed, ...), as
// "udp_sim key=value ...".
std::string history_comment(const SimConfig& config);
// Appends the record's line, '\n' included, to `out`, as the history's one writer
// (history::append_line in tools/nemesis/history.h) writes it.
void append_history_line(const HistoryRecord& r, std::string& out);

class HistoryLog {
 public:
  static constexpr size_t kChunkRecords = size_t{1} << 16;  // 3 MiB of records, ~6 MiB of text

  // Writes the header to `out` at once; `out` must outlive finish().
  HistoryLog(std::ostream& out, std::string_view comment, size_t chunk_records = kChunkRecords);
  ~HistoryLog();  // finish(), if not called yet
  HistoryLog(const HistoryLog&) = delete;
  HistoryLog& operator=(const HistoryLog&) = delete;

  void add(const HistoryRecord& r) {
    chunk_.push_back(r);  // within the capacity reserved: no allocation
    ++records_;
    if (chunk_.size() == chunk_records_) hand_off();
  }
  // Writes every record added, ends the writer thread and flushes the stream. Returns false if a
  // write failed (the file is incomplete). Once; add() must not follow.
  bool finish();
  uint64_t records() const { return records_; }

 private:
  void hand_off();
  void write_loop();

  // Constant after construction.
  std::ostream& out_;  // the writer thread's after construction, until finish() joins it
  size_t chunk_records_;

  // The driver's thread only.
  std::vector<HistoryRecord> chunk_;  // being filled, capacity chunk_records_
  uint64_t records_ = 0;
  bool finished_ = false;

  // Protected by mutex_.
  std::mutex mutex_;
  std::condition_variable wake_;                   // the writer: a chunk to write, or closing
  std::deque<std::vector<HistoryRecord>> full_;    // for the writer, oldest first
  std::vector<std::vector<HistoryRecord>> spare_;  // written and emptied, capacity kept
  bool closing_ = false;

  std::thread writer_;  // last: started once every member above exists
};

}  // namespace imhash::sim
