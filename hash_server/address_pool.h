// AddressPool: the IPv6 addresses of one shard's records, 16 bytes each, in fixed blocks of 4096
// (64 KiB) that are never moved or reallocated; a record's slot holds its address's index. Freed
// entries form an intrusive free list (the first 4 bytes of a free entry hold the next free index),
// so churn reuses them and adding an address never copies the others.
//
// Not thread-safe: the owning store's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace imhash {

class AddressPool {
 public:
  using Address = std::array<uint8_t, 16>;
  static constexpr uint32_t kBlockBits = 12;
  static constexpr uint32_t kBlockEntries = 1u << kBlockBits;

  // Stores `a` and returns its index.
  uint32_t add(const Address& a);
  const Address& at(uint32_t index) const {
    return blocks_[index >> kBlockBits][index & (kBlockEntries - 1)];
  }
  void replace(uint32_t index, const Address& a) {
    blocks_[index >> kBlockBits][index & (kBlockEntries - 1)] = a;
  }
  void release(uint32_t index);
  // Whether `index` was ever handed out (for consistency checks).
  bool issued(uint32_t index) const { return index < next_fresh_; }

  size_t size() const { return live_; }
  size_t memory_bytes() const {
    return blocks_.size() * kBlockEntries * sizeof(Address) +
           blocks_.capacity() * sizeof(blocks_[0]);
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  std::vector<std::unique_ptr<Address[]>> blocks_;
  uint32_t next_fresh_ = 0;  // entries below this were handed out at least once
  uint32_t free_head_ = kNone;
  size_t live_ = 0;
};

}  // namespace imhash
