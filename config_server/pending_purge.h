// PendingPurge: one entry of the config server's durable list of automatic purges to send
// (config_server/state_store.h keeps the list; config_server/move_rules.h says when one goes).
#pragma once

#include <cstdint>
#include <string>

namespace imhash {

// An automatic purge of the old copies a hash server holds after table `version` moved ids away
// from it (docs/operations.md, "The pending purge"). It is sent once the grace period has passed
// (`not_before_ms`, wall-clock Unix milliseconds, so it survives a restart), every node that is up
// runs `version`, and the server's stream is done at `version` or later.
struct PendingPurge {
  std::string server;
  uint64_t version = 0;
  uint64_t not_before_ms = 0;
  // The server was up when the change was made and was told to stream what it holds: if it is no
  // longer in the table when it comes back (re-registers, or heartbeats again after DOWN), it
  // streams again rather than purging everything (a server removed while DOWN purges all).
  bool streams = false;
  friend bool operator==(const PendingPurge&, const PendingPurge&) = default;
};

}  // namespace imhash
