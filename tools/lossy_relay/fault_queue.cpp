#include "tools/lossy_relay/fault_queue.h"

#include <algorithm>

namespace imhash {

namespace {

// std::*_heap builds a max-heap: "less" means "due later", so the front is the earliest.
bool later(const FaultQueue::Packet& a, const FaultQueue::Packet& b) {
  return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq;
}

}  // namespace

std::string describe(const FaultCounts& f, const SendCounts& s) {
  return "received " + std::to_string(f.received) + " forwarded " + std::to_string(s.forwarded) +
         " lost " + std::to_string(f.lost) + " duplicated " + std::to_string(f.duplicated) +
         " reordered " + std::to_string(f.reordered) + " overflow " + std::to_string(f.overflow) +
         " send_failed " + std::to_string(s.send_failed) + " expired " + std::to_string(s.expired);
}

FaultQueue::FaultQueue(const FaultParams& params) : p_(params), rng_(params.seed) {}

void FaultQueue::offer(uint32_t dir, uint64_t key, std::span<const char> data, int64_t now_ns) {
  FaultCounts& c = counts_[dir & 1];
  ++c.received;
  if (chance(p_.loss)) {
    ++c.lost;
    return;
  }
  // Each copy draws its own delay, as netem's duplicate goes through the qdisc again.
  const int copies = chance(p_.duplicate) ? 2 : 1;
  if (copies == 2) ++c.duplicated;
  for (int i = 0; i < copies; ++i) {
    int64_t due = now_ns;
    if (chance(p_.reorder)) {
      ++c.reordered;
    } else {
      double delay = static_cast<double>(p_.delay_ns);
      if (p_.jitter_ns > 0) delay += (2 * unit_(rng_) - 1) * static_cast<double>(p_.jitter_ns);
      due += static_cast<int64_t>(std::max(0.0, delay));
    }
    push(dir & 1, key, data, due);
  }
}

void FaultQueue::push(uint32_t dir, uint64_t key, std::span<const char> data, int64_t due_ns) {
  if (queue_.size() >= p_.max_queued || bytes_ + data.size() > p_.max_bytes) {
    ++counts_[dir].overflow;
    return;
  }
  Packet pk;
  pk.due_ns = due_ns;
  pk.seq = seq_++;
  pk.dir = dir;
  pk.key = key;
  pk.data.assign(data.begin(), data.end());
  bytes_ += data.size();
  queue_.push_back(std::move(pk));
  std::push_heap(queue_.begin(), queue_.end(), later);
}

bool FaultQueue::pop_due(int64_t now_ns, Packet& out) {
  if (queue_.empty() || queue_.front().due_ns > now_ns) return false;
  std::pop_heap(queue_.begin(), queue_.end(), later);
  out = std::move(queue_.back());
  queue_.pop_back();
  bytes_ -= out.data.size();
  return true;
}

}  // namespace imhash
