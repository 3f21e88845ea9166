// PendingTable: the requests one link has in flight, keyed by correlation id, with a bounded
// capacity. A correlation id is a slot index plus a generation, and freed slots are reused in FIFO
// order, so a late reply to a timed-out request (docs/design.md §5) never matches a newer request.
// Deadlines are kept in send order (one timeout for all), so expiry looks only at the oldest.
//
// Not thread-safe: owned by one link, on its worker's thread.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace imhash {

template <typename T>
class PendingTable {
 public:
  // `capacity` is rounded up to a power of two.
  explicit PendingTable(uint32_t capacity)
      : slots_(std::bit_ceil(std::max<uint32_t>(capacity, 2))),
        index_bits_(std::countr_zero(static_cast<uint32_t>(slots_.size()))),
        free_(slots_.size()),
        order_(slots_.size()) {
    for (uint32_t i = 0; i < slots_.size(); ++i) free_[i] = i;
    free_count_ = static_cast<uint32_t>(slots_.size());
  }

  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t size() const { return capacity() - free_count_; }
  // Full when no slot is free or the send-order ring is full (a stuck oldest request).
  bool full() const { return free_count_ == 0 || order_count_ == order_.size(); }
  // How many more entries fit now (0 when full()).
  uint32_t room() const {
    return std::min(free_count_, static_cast<uint32_t>(order_.size() - order_count_));
  }

  // Stores `value`; returns its correlation id. Precondition: !full().
  uint32_t insert(T value, int64_t deadline) {
    const uint32_t index = free_[free_head_];
    free_head_ = (free_head_ + 1) & mask();
    --free_count_;
    Slot& s = slots_[index];
    s.value = std::move(value);
    s.deadline = deadline;
    s.live = true;
    const uint32_t corr = s.generation << index_bits_ | index;
    order_[(order_head_ + order_count_) & mask()] = corr;
    ++order_count_;
    return corr;
  }

  // The live entry with this correlation id, or nullptr (unknown, answered or expired).
  T* find(uint32_t corr) {
    Slot& s = slots_[corr & mask()];
    return s.live && (s.generation << index_bits_ | (corr & mask())) == corr ? &s.value : nullptr;
  }

  // Frees the entry (call after find() returned it).
  void erase(uint32_t corr) {
    const uint32_t index = corr & mask();
    Slot& s = slots_[index];
    s.live = false;
    s.generation = (s.generation + 1) & generation_mask();
    free_[(free_head_ + free_count_) & mask()] = index;
    ++free_count_;
    drop_dead_front();
  }

  // Removes and hands to `f` every entry whose deadline is at or before `now`, oldest first.
  template <typename F>
  void expire(int64_t now, F&& f) {
    drop_dead_front();
    while (order_count_ > 0) {
      const uint32_t corr = order_[order_head_];
      Slot& s = slots_[corr & mask()];
      if (s.deadline > now) break;
      T value = std::move(s.value);
      erase(corr);
      f(value);
    }
  }

  // Removes and hands to `f` every live entry (the link went down).
  template <typename F>
  void drain(F&& f) {
    while (order_count_ > 0) {
      const uint32_t corr = order_[order_head_];
      T value = std::move(slots_[corr & mask()].value);
      erase(corr);
      f(value);
    }
  }

 private:
  struct Slot {
    T value{};
    int64_t deadline = 0;
    uint32_t generation = 0;
    bool live = false;
  };
  uint32_t mask() const { return capacity() - 1; }
  uint32_t generation_mask() const { return (1u << (32 - index_bits_)) - 1; }
  // Entries answered out of order stay in the send-order ring until they reach its front.
  void drop_dead_front() {
    while (order_count_ > 0 && find(order_[order_head_]) == nullptr) {
      order_head_ = (order_head_ + 1) & mask();
      --order_count_;
    }
  }

  std::vector<Slot> slots_;
  int index_bits_;
  std::vector<uint32_t> free_;  // ring of free slot indexes, FIFO
  uint32_t free_head_ = 0;
  uint32_t free_count_ = 0;
  std::vector<uint32_t> order_;  // ring of correlation ids in send order
  uint32_t order_head_ = 0;
  uint32_t order_count_ = 0;
};

}  // namespace imhash
