#include "hash_server/huge_page_allocator.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using imhash::HugePageAllocator;

TEST_CASE("huge_page_allocator: large arrays are 2 MiB aligned, small ones ordinary, all usable") {
  HugePageAllocator<uint64_t> alloc;
  const size_t large = (HugePageAllocator<uint64_t>::kHugePage / sizeof(uint64_t)) * 3 + 5;
  uint64_t* p = alloc.allocate(large);
  CHECK(reinterpret_cast<uintptr_t>(p) % HugePageAllocator<uint64_t>::kHugePage == 0);
  for (size_t i = 0; i < large; ++i) p[i] = i;
  CHECK(p[large - 1] == large - 1);
  alloc.deallocate(p, large);

  uint64_t* small = alloc.allocate(16);
  small[15] = 7;
  CHECK(small[15] == 7u);
  alloc.deallocate(small, 16);

  // As a vector's allocator, through growth across the 2 MiB boundary.
  std::vector<uint64_t, HugePageAllocator<uint64_t>> v;
  for (uint64_t i = 0; i < 600000; ++i) v.push_back(i * 3);
  for (uint64_t i = 0; i < v.size(); i += 9973) CHECK(v[i] == i * 3);
}
