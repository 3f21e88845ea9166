#include "config_server/takeover_hold.h"

#include <algorithm>

namespace imhash::cluster {

void TakeoverHold::on_lead(uint64_t version, int64_t now_ns, int64_t down_after_ns) {
  settle_until_ns_ = version == 0 ? 0 : now_ns + std::max(down_after_ns, kSettleNs);
  holding_ = settle_until_ns_ != 0;
}

int64_t TakeoverHold::settling_left(int64_t now_ns) const {
  return settle_until_ns_ == 0 ? 0 : std::max<int64_t>(0, settle_until_ns_ - now_ns);
}

bool TakeoverHold::holds_push(uint64_t node_version, uint64_t latest) const {
  return holding_ && node_version > 0 && node_version < latest;
}

bool TakeoverHold::on_node_runs(uint64_t node_version, uint64_t latest) {
  if (!holding_ || latest == 0 || node_version != latest) return false;
  holding_ = false;
  return true;
}

bool TakeoverHold::on_tick(int64_t now_ns) {
  if (!holding_ || settling_left(now_ns) > 0) return false;
  holding_ = false;
  return true;
}

}  // namespace imhash::cluster
