// RoutingState: what a login worker routes with — the current router and the tables replaced less
// than a grace period ago, whose owners may still hold ids the current table places elsewhere
// (docs/design.md, "Changing the table"). Immutable once built; shared by all workers as
// std::shared_ptr<const RoutingState>; any thread may read it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/routing/router.h"

namespace imhash {

struct RoutingState {
  // A table replaced less than a grace period ago: ids it placed elsewhere may still be found
  // there until their users write again (or a read repair copies them).
  struct Earlier {
    std::shared_ptr<const Router> router;
    int64_t grace_until_ns = 0;  // steady clock
  };
  static constexpr size_t kMaxEarlier = 4;

  std::shared_ptr<const Router> current;
  std::vector<Earlier> earlier;  // newest first

  uint64_t version() const { return current ? current->version() : 0; }
  // The latest end of a grace period (0: none).
  int64_t grace_until_ns() const { return earlier.empty() ? 0 : earlier.front().grace_until_ns; }

  // This state with the grace periods that have not ended at `now_ns` lasting until `until_ns`,
  // or null when none is extended. The config server pushes the version a login server runs again
  // while its streams run (ClusterController::extend_grace): a record not yet streamed to its new
  // owner is found only at an earlier one. Not a period that has ended: those owners may have
  // purged.
  std::shared_ptr<RoutingState> with_grace_until(int64_t now_ns, int64_t until_ns) const {
    auto next = std::make_shared<RoutingState>(*this);
    bool extended = false;
    for (Earlier& e : next->earlier) {
      if (e.grace_until_ns > now_ns && e.grace_until_ns < until_ns) {
        e.grace_until_ns = until_ns;
        extended = true;
      }
    }
    return extended ? next : nullptr;
  }
};

// Whether a login worker's newer table (`pending`) takes effect now. Once each link it opened to a
// server the table adds has been tried, so a joining server is not reported UNAVAILABLE while it
// is dialled; or at once when a hash server's MOVED named that version or a newer one
// (`servers_run`): they run it already, and refuse every request under the older table until it
// takes effect. (A nemesis run: a login server cut from a server added back by a drain held its
// table for the half second its connect took; 161 writes were refused MOVED and timed out.)
constexpr bool table_takes_effect(uint64_t pending, bool new_links_tried, uint64_t servers_run) {
  return new_links_tried || servers_run >= pending;
}

}  // namespace imhash
