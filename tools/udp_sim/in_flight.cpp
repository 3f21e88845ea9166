#include "tools/udp_sim/in_flight.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace imhash::sim {

InFlightTable::InFlightTable(uint32_t capacity) {
  capacity = std::clamp<uint32_t>(capacity, 1, kMaxCapacity);
  slot_bits_ = std::max<uint32_t>(1, static_cast<uint32_t>(std::bit_width(capacity - 1)));
  slot_mask_ = (1u << slot_bits_) - 1;
  slots_.resize(capacity);
  links_.resize(capacity);
  free_.reserve(capacity);
  // Lowest slots on top of the stack, so a small load stays in a few cache lines.
  for (uint32_t i = capacity; i-- > 0;) free_.push_back(i);
}

uint32_t InFlightTable::acquire() {
  assert(!free_.empty());
  const uint32_t slot = free_.back();
  free_.pop_back();
  Links& l = links_[slot];
  l.in_use = true;
  ++l.generation;
  Slot& s = slots_[slot];
  s = Slot{};
  s.request_id = (l.generation << slot_bits_) | slot;
  return slot;
}

void InFlightTable::release(uint32_t slot) {
  assert(links_[slot].in_use);
  disarm(slot);
  links_[slot].in_use = false;
  free_.push_back(slot);
}

uint32_t InFlightTable::find(uint32_t request_id) const {
  const uint32_t slot = request_id & slot_mask_;
  if (slot >= slots_.size() || !links_[slot].in_use || slots_[slot].request_id != request_id) {
    return kNone;
  }
  return slot;
}

void InFlightTable::disarm(uint32_t slot) {
  Links& l = links_[slot];
  if (!l.armed) return;
  if (l.prev != kNone)
    links_[l.prev].next = l.next;
  else
    head_ = l.next;
  if (l.next != kNone)
    links_[l.next].prev = l.prev;
  else
    tail_ = l.prev;
  l.prev = l.next = kNone;
  l.armed = false;
}

void InFlightTable::arm(uint32_t slot, int64_t deadline_ns) {
  disarm(slot);
  assert(tail_ == kNone || slots_[tail_].deadline_ns <= deadline_ns);
  slots_[slot].deadline_ns = deadline_ns;
  Links& l = links_[slot];
  l.armed = true;
  l.prev = tail_;
  l.next = kNone;
  if (tail_ != kNone)
    links_[tail_].next = slot;
  else
    head_ = slot;
  tail_ = slot;
}

int64_t InFlightTable::next_deadline() const {
  return head_ == kNone ? INT64_MAX : slots_[head_].deadline_ns;
}

uint32_t InFlightTable::pop_expired(int64_t now_ns) {
  if (head_ == kNone || slots_[head_].deadline_ns > now_ns) return kNone;
  const uint32_t slot = head_;
  disarm(slot);
  return slot;
}

}  // namespace imhash::sim
