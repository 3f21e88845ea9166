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
};

}  // namespace imhash
