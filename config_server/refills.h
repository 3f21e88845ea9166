// Refills: the config server's book of hash servers being refilled (docs/design.md §3,
// "Replicas"). A hash server that restarts empty in a table with replicas gets its records back
// from the other replicas: the config server tells it that it is filling (it answers a LOOKUP of
// a user it does not hold NOT_READY, so login servers read another copy) and tells every other hash
// server of the table to stream with it named as `lost` (control::StreamCommand). The refill is
// complete when each of those peers has reported its stream done, at the refill's version or a
// later one, with the server among the stream's `lost`; a peer that goes DOWN or leaves the table
// meanwhile can send nothing more and is no longer waited for. Pure bookkeeping: ConfigService
// sends the messages.
//
// Not thread-safe: the config server's main thread only.
#pragma once

#include <boost/json/array.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/control_protocol.h"

namespace imhash {

class Refills {
 public:
  struct Refill {
    uint64_t version = 0;           // the table version it was started at
    std::set<std::string> waiting;  // peers whose stream has not reported done yet
    std::set<std::string> done;     // peers that have
    int64_t started_ns = 0;         // steady clock
  };

  // Starts (or starts again) the refill of `server` from `peers` at table `version`.
  void start(const std::string& server, uint64_t version, const std::vector<std::string>& peers,
             int64_t now_ns);
  // A stream report from `peer`; returns the servers whose refill it completed (and forgets them).
  std::vector<std::string> on_report(const std::string& peer, const control::StreamReport& r);
  // `peer` went DOWN or left the table: it is not waited for. Returns the refills it completed.
  std::vector<std::string> drop_peer(const std::string& peer);
  // The refilled server itself is gone (DOWN, restarted, removed): its refill is forgotten.
  void cancel(const std::string& server);
  // Every refill, forgotten (e.g. the table no longer has replicas); returns the servers.
  std::vector<std::string> clear();

  bool refilling(const std::string& server) const { return refills_.count(server) != 0; }
  const std::map<std::string, Refill>& all() const { return refills_; }
  // [{"server":S,"version":N,"waiting":[S,...],"done":[S,...],"seconds":N}], for imctl status.
  boost::json::array json(int64_t now_ns) const;

 private:
  std::vector<std::string> take_complete();

  std::map<std::string, Refill> refills_;  // by the refilled server's name
};

}  // namespace imhash
