// Defects put back on purpose, so the history checker can be shown to catch them
// (docs/reliability.md, "The checker, proved"): IMHASH_DEFECTS=no-hints,no-tombstones in a
// daemon's environment. Each makes it lose writes the design keeps; a daemon takes the ones that
// are its own and says so in a warning at start-up (an unknown name is an error). Never set it
// outside tests: the etcd robustness tests' failpoints (GOFAIL_FAILPOINTS) are the model. Read
// once, by main(), before anything starts.
#pragma once

#include <string>

namespace imhash {

struct Defects {
  bool no_hints = false;       // login server: writes for a member it cannot reach are dropped
  bool no_tombstones = false;  // hash server: deletes during a move are not remembered
  bool any() const { return no_hints || no_tombstones; }
};

// IMHASH_DEFECTS, parsed ("" or unset: none). Throws UsageError naming an unknown defect.
Defects defects_from_environment();
// "no-hints,no-tombstones" (the ones set).
std::string to_string(const Defects& d);

}  // namespace imhash
