// What the config server's core hears and what it asks for (config_server/cluster_controller.h):
// the time an event happens, as the adapter read it, and the actions it performs, in order.
//
// Plain values: no socket, no clock, no log. Any thread may build or read them; the controller and
// its adapter (ConfigService) use them on the config server's main thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/routing/control_protocol.h"
#include "common/routing/table.h"
#include "config_server/node_registry.h"
#include "config_server/pending_purge.h"

namespace imhash::cluster {

// When an event happened: the steady clock for windows (DOWN, LAGGING, settling, rates, refill
// patience) and the wall clock for what outlives the process or crosses hosts (a pending purge's
// not-before time, a heartbeat's send time).
struct Now {
  int64_t steady_ns = 0;
  uint64_t unix_us = 0;
  uint64_t unix_ms() const { return unix_us / 1000; }
};

enum class LogLevel : uint8_t { kInfo, kWarn, kError };

// A table change ready to be written: the new table (its version set), the pending purges written
// with it in the same store write, and its push, framed once for every node. The adapter writes
// it and hands the result back (ClusterController::on_committed).
struct ChangePlan {
  Table table;
  std::string change;  // in words, for the history and the logs
  std::vector<PendingPurge> pending;
  std::shared_ptr<const std::vector<uint8_t>> push;
  std::string drained;  // imctl drain: the server drained ("" for other changes)
};

// Send one control message on a node link.
struct SendMessage {
  LinkId link = 0;
  control::Message message;
};
// Send a table push already framed for every node (the same bytes for all of them).
struct SendTable {
  LinkId link = 0;
  std::shared_ptr<const std::vector<uint8_t>> framed;
};
// Send a refusal, then close the link once it is written; nothing more is read from it.
struct RefuseLink {
  LinkId link = 0;
  control::Refused refused;
};
struct CloseLink {
  LinkId link = 0;
};
// The node a link registered as ("hash/hash1"; "" none): the link's own limits and logs use it.
struct LabelLink {
  LinkId link = 0;
  std::string key;
};
struct LogRecord {
  LogLevel level = LogLevel::kInfo;
  std::string text;
};
// Write the pending purges (`why`, for the log if the write fails: the state file is then one
// step behind, which a restart survives; docs/design.md §4).
struct PersistPending {
  std::vector<PendingPurge> pending;
  std::string why;
};
// Write a table change the controller decided on its own (a failover), then hand the result back.
struct CommitChange {
  ChangePlan plan;
};

using Action = std::variant<SendMessage, SendTable, RefuseLink, CloseLink, LabelLink, LogRecord,
                            PersistPending, CommitChange>;
using Actions = std::vector<Action>;

}  // namespace imhash::cluster
