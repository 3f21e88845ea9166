// Refills: the config server's book of hash servers being refilled (docs/design.md §3,
// "Replicas"). A hash server that restarts empty in a table with replicas gets its records back
// from the other replicas: the config server tells it that it is filling (it answers a LOOKUP of
// a user it does not hold NOT_READY, so login servers read another copy) and tells every other hash
// server of the table to stream with it named as `lost` (control::StreamCommand). The refill is
// complete when each of those peers has reported its stream done, at the refill's version or a
// later one, with the server among the stream's `lost`; a peer that goes DOWN or leaves the table
// meanwhile can send nothing more and is no longer waited for. Then the refill waits for the
// login servers to send it the writes they held while it was away (ConfigService checks their
// heartbeats' held writes); it ends when ConfigService cancels it. Pure bookkeeping:
// ConfigService sends the messages.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/json/array.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/routing/control_protocol.h"

namespace imhash {

class Refills {
 public:
  // How far one peer's stream for the refill has got, from its latest report.
  struct PeerProgress {
    double scanned = 0;  // share of the peer's slots examined, 0..1 (1 when done)
    uint64_t sent = 0;   // records it has had acknowledged by the refilled server
  };
  struct Refill {
    uint64_t version = 0;                          // the table version it was started at
    std::set<std::string> waiting;                 // peers whose stream has not reported done yet
    std::set<std::string> done;                    // peers that have
    int64_t started_ns = 0;                        // steady clock
    std::map<std::string, PeerProgress> progress;  // peers that have reported this refill's stream
    int64_t streams_done_ns = 0;                   // when `waiting` became empty (0: not yet)
  };

  // Starts (or starts again) the refill of `server` from `peers` at table `version`.
  void start(const std::string& server, uint64_t version, const std::vector<std::string>& peers,
             int64_t now_ns);
  // A stream report from `peer` at `now_ns`: its progress for each refill it streams to; returns
  // the servers whose peers' streams it completed (each once: they stay in the book).
  std::vector<std::string> on_report(const std::string& peer, const control::StreamReport& r,
                                     int64_t now_ns);
  // `peer` went DOWN or left the table: it is not waited for. Returns the refills whose streams
  // that completed.
  std::vector<std::string> drop_peer(const std::string& peer, int64_t now_ns);
  // The refilled server itself is gone (DOWN, restarted, removed): its refill is forgotten.
  void cancel(const std::string& server);
  // Every refill, forgotten (e.g. the table no longer has replicas); returns the servers.
  std::vector<std::string> clear();

  bool refilling(const std::string& server) const { return refills_.count(server) != 0; }
  const std::map<std::string, Refill>& all() const { return refills_; }
  // [{"server":S,"version":N,"waiting":[S,...],"done":[S,...],"seconds":N,"progress":F,
  //   "records_sent":N,"streams_done":B}], for imctl status: progress is the mean over the peers
  // of the share of their slots examined (a peer not heard from yet counts 0), records_sent the
  // sum of what they have had acknowledged by the refilled server.
  boost::json::array json(int64_t now_ns) const;

 private:
  std::vector<std::string> take_complete(int64_t now_ns);

  std::map<std::string, Refill> refills_;  // by the refilled server's name
};

}  // namespace imhash
