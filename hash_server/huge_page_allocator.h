// HugePageAllocator: a std::allocator that backs large arrays with transparent huge pages.
//
// Why: a shard's record table is probed at a random slot per request. With 4 KiB pages almost
// every probe of a table of some megabytes misses the TLB, and on a virtual machine the page walk
// is dear: measured on the development VM, the probe was half of a hash server's time at full load
// and dropped out of the profile with huge pages. Linux backs a 2 MiB-aligned region with huge
// pages when it is marked MADV_HUGEPAGE (or always, if the host is configured so); where they are
// unavailable the madvise is a no-op and the memory is ordinary.
//
// Arrays under 2 MiB come from the ordinary allocator. Stateless; any thread.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace imhash {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>{}.allocate(n);
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: ordinary pages if refused
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePage) {
      std::allocator<T>{}.deallocate(p, n);
    } else {
      std::free(p);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace imhash
