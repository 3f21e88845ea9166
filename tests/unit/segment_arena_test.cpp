#include "hash_server/segment_arena.h"

#include <doctest/doctest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "hash_server/address_pool.h"

using imhash::AddressPool;
using imhash::SegmentArena;

namespace {
// Resident pages of [p, p + bytes) (both page aligned).
size_t resident_pages(const uint8_t* p, size_t bytes) {
  std::vector<unsigned char> v(bytes / SegmentArena::kPageBytes);
  REQUIRE(mincore(const_cast<uint8_t*>(p), bytes, v.data()) == 0);
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}
}  // namespace

TEST_CASE(
    "segment_arena: chunked blocks are aligned, reused, and their chunks unmapped when free") {
  SegmentArena a;
  constexpr size_t kBlock = 64 << 10;  // 32 to a chunk
  std::vector<uint8_t*> blocks;
  for (int i = 0; i < 40; ++i) {
    uint8_t* b = a.allocate(kBlock);
    CHECK(reinterpret_cast<uintptr_t>(b) % 64 == 0);
    std::memset(b, i, kBlock);
    blocks.push_back(b);
  }
  CHECK(a.bytes_in_use() == 40 * kBlock);
  CHECK(a.bytes_mapped() == 2 * SegmentArena::kChunkBytes);
  for (int i = 0; i < 40; ++i) CHECK(blocks[i][kBlock - 1] == i);
  // A freed block is handed out again before a new chunk is mapped.
  a.release(blocks[3], kBlock);
  CHECK(a.allocate(kBlock) == blocks[3]);
  for (uint8_t* b : blocks) a.release(b, kBlock);
  CHECK(a.bytes_in_use() == 0);
  CHECK(a.bytes_mapped() == 0);
}

TEST_CASE("segment_arena: a released block's pages leave memory at once") {
  SegmentArena a;
  constexpr size_t kBlock = 100 * 1024 + 64;  // not a whole number of pages
  uint8_t* first = a.allocate(kBlock);
  uint8_t* second = a.allocate(kBlock);
  uint8_t* third = a.allocate(kBlock);
  REQUIRE(second == first + kBlock);
  REQUIRE(third == second + kBlock);
  std::memset(first, 1, 3 * kBlock);
  const auto* page0 = reinterpret_cast<const uint8_t*>(
      (reinterpret_cast<uintptr_t>(second) + SegmentArena::kPageBytes - 1) &
      ~(SegmentArena::kPageBytes - 1));
  const size_t whole = 24 * SegmentArena::kPageBytes;  // inside the second block
  CHECK(resident_pages(page0, whole) == 24);
  a.release(second, kBlock);
  CHECK(resident_pages(page0, whole) == 0);
  CHECK(first[kBlock - 1] == 1);  // neighbours keep their bytes, shared pages included
  CHECK(third[0] == 1);
  a.release(first, kBlock);
  a.release(third, kBlock);
  CHECK(a.bytes_mapped() == 0);
}

TEST_CASE("segment_arena: small blocks come from malloc, large ones get their own mapping") {
  SegmentArena a;
  uint8_t* small = a.allocate(4096);
  small[4095] = 7;
  CHECK(a.bytes_mapped() == 0);
  constexpr size_t kLarge = 3 << 20;
  uint8_t* large = a.allocate(kLarge);
  CHECK(reinterpret_cast<uintptr_t>(large) % SegmentArena::kChunkBytes == 0);
  large[kLarge - 1] = 9;
  CHECK(a.bytes_mapped() >= kLarge);
  a.set_huge_pages(true);  // advice only: the memory behaves the same
  uint8_t* chunked = a.allocate(256 << 10);
  chunked[0] = 1;
  a.release(chunked, 256 << 10);
  a.release(large, kLarge);
  a.release(small, 4096);
  CHECK(a.bytes_mapped() == 0);
  CHECK(a.bytes_in_use() == 0);
}

TEST_CASE("address_pool: entries are stable, freed ones reused, blocks never copied") {
  AddressPool pool;
  AddressPool::Address a{};
  std::vector<uint32_t> idx;
  for (uint32_t i = 0; i < 10000; ++i) {
    a[15] = static_cast<uint8_t>(i);
    a[14] = static_cast<uint8_t>(i >> 8);
    idx.push_back(pool.add(a));
  }
  const AddressPool::Address* first = &pool.at(idx[0]);
  for (uint32_t i = 0; i < 10000; ++i) {
    CHECK(pool.at(idx[i])[15] == static_cast<uint8_t>(i));
    CHECK(pool.at(idx[i])[14] == static_cast<uint8_t>(i >> 8));
  }
  CHECK(&pool.at(idx[0]) == first);  // growth added blocks without moving the first
  const size_t mem = pool.memory_bytes();
  for (uint32_t i = 0; i < 10000; i += 2) pool.release(idx[i]);
  CHECK(pool.size() == 5000);
  for (uint32_t i = 0; i < 5000; ++i) pool.add(a);
  CHECK(pool.size() == 10000);
  CHECK(pool.memory_bytes() == mem);
  for (uint32_t i = 1; i < 10000; i += 2) CHECK(pool.at(idx[i])[15] == static_cast<uint8_t>(i));
}
