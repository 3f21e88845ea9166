#include "hash_server/address_pool.h"

#include <stdexcept>

namespace imhash {

uint32_t AddressPool::add(const Address& a) {
  uint32_t index;
  if (free_head_ != kNone) {
    index = free_head_;
    std::memcpy(&free_head_, at(index).data(), sizeof(free_head_));
  } else {
    if (next_fresh_ == kNone) throw std::length_error("IPv6 address pool full");
    if ((next_fresh_ >> kBlockBits) == blocks_.size()) {
      blocks_.push_back(std::make_unique_for_overwrite<Address[]>(kBlockEntries));
    }
    index = next_fresh_++;
  }
  replace(index, a);
  ++live_;
  return index;
}

void AddressPool::release(uint32_t index) {
  Address& e = blocks_[index >> kBlockBits][index & (kBlockEntries - 1)];
  std::memcpy(e.data(), &free_head_, sizeof(free_head_));
  free_head_ = index;
  --live_;
}

}  // namespace imhash
