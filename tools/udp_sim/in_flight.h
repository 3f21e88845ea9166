// InFlightTable: the requests udp_sim is waiting for, in a fixed number of slots allocated once.
//
// request_id = generation << slot_bits | slot. It is unique among the requests in flight, and a
// late reply to a request that has ended (its slot since reused) does not match, because the slot's
// generation has moved on. A retry keeps its request_id and its bytes.
//
// Armed slots sit in an intrusive list ordered by deadline: every try gets the same timeout and
// the clock only goes forward, so appending keeps the list sorted, and arming, disarming and
// expiring are O(1).
//
// Not thread-safe: the driver's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tools/udp_sim/user_model.h"

namespace imhash::sim {

inline constexpr size_t kMaxRequestBytes = 96;  // 20 header + ENDPOINT v6 21 + TOKEN 30 + slack

struct Slot {
  RequestTag tag;
  int64_t start_ns = 0;     // scheduled send (open loop) or first send: latency starts here
  int64_t issued_ns = 0;    // the loop turn that first sent it: the history's invoke time
  int64_t deadline_ns = 0;  // of the current try
  uint32_t request_id = 0;
  uint16_t socket = 0;
  uint8_t tries = 0;    // sends so far, the first included
  uint8_t len = 0;      // of `bytes`
  bool queued = false;  // in a socket's send queue, not yet handed to the kernel
  bool warmup = false;  // scheduled before the measured part of the run: in no figure
  std::array<uint8_t, kMaxRequestBytes> bytes{};
};

class InFlightTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint32_t kMaxCapacity = 1u << 20;

  // 1 <= capacity <= kMaxCapacity.
  explicit InFlightTable(uint32_t capacity);

  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t size() const { return capacity() - static_cast<uint32_t>(free_.size()); }
  bool full() const { return free_.empty(); }

  // Takes a free slot (precondition: !full()), gives it a new request_id, and returns its index.
  uint32_t acquire();
  // Frees a slot (disarming it).
  void release(uint32_t slot);
  Slot& operator[](uint32_t slot) { return slots_[slot]; }
  const Slot& operator[](uint32_t slot) const { return slots_[slot]; }
  bool in_use(uint32_t slot) const { return links_[slot].in_use; }

  // The slot whose request carries `request_id`, or kNone.
  uint32_t find(uint32_t request_id) const;

  // Sets the slot's deadline and moves it to the end of the deadline list. Deadlines must not
  // decrease from one call to the next (the same timeout from a monotonic clock).
  void arm(uint32_t slot, int64_t deadline_ns);
  // The earliest deadline of an armed slot, or INT64_MAX.
  int64_t next_deadline() const;
  // Disarms and returns the earliest armed slot if its deadline is <= now_ns, else kNone.
  uint32_t pop_expired(int64_t now_ns);

 private:
  struct Links {
    uint32_t prev = kNone;
    uint32_t next = kNone;
    uint32_t generation = 0;
    bool armed = false;
    bool in_use = false;
  };
  void disarm(uint32_t slot);

  // Constant after construction.
  uint32_t slot_bits_ = 1;
  uint32_t slot_mask_ = 1;

  std::vector<Slot> slots_;
  std::vector<Links> links_;
  std::vector<uint32_t> free_;  // stack of free slots
  uint32_t head_ = kNone;       // earliest deadline
  uint32_t tail_ = kNone;
};

}  // namespace imhash::sim
