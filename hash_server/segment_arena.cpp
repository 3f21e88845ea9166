#include "hash_server/segment_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdlib>
#include <new>

namespace imhash {

namespace {
uintptr_t page_floor(uintptr_t a) { return a & ~(uintptr_t{SegmentArena::kPageBytes} - 1); }
uintptr_t page_ceil(uintptr_t a) { return page_floor(a + SegmentArena::kPageBytes - 1); }
}  // namespace

void SegmentArena::Chunk::set(size_t i, bool on) {
  const uint64_t bit = uint64_t{1} << (i % 64);
  used_bits[i / 64] = on ? used_bits[i / 64] | bit : used_bits[i / 64] & ~bit;
}

SegmentArena::~SegmentArena() {
  for (auto& [base, chunk] : chunks_) unmap(chunk->base, kChunkBytes);
  for (auto& [base, bytes] : large_) unmap(reinterpret_cast<uint8_t*>(base), bytes);
}

uint8_t* SegmentArena::map(size_t bytes) {
  // Map one chunk more than asked and trim, so that the block starts on a 2 MiB boundary (a huge
  // page can back it only there).
  const size_t span = bytes + kChunkBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kChunkBytes - 1) & ~(uintptr_t{kChunkBytes} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + bytes)
    munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  auto* p = reinterpret_cast<uint8_t*>(aligned);
  if (huge_pages_) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: ordinary pages if refused
  mapped_ += bytes;
  return p;
}

void SegmentArena::unmap(uint8_t* p, size_t bytes) {
  munmap(p, bytes);
  mapped_ -= bytes;
}

SegmentArena::Pool& SegmentArena::pool_for(size_t bytes) {
  for (Pool& p : pools_) {
    if (p.block_bytes == bytes) return p;
  }
  Pool p;
  p.block_bytes = bytes;
  p.blocks_per_chunk = static_cast<uint32_t>(kChunkBytes / bytes);
  pools_.push_back(std::move(p));
  return pools_.back();
}

uint8_t* SegmentArena::allocate(size_t bytes) {
  assert(bytes % 64 == 0 && bytes > 0);
  if (bytes < kMinChunkedBlock) {
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    in_use_ += bytes;
    return static_cast<uint8_t*>(p);
  }
  if (bytes > kMaxChunkedBlock) {
    const size_t mapped = page_ceil(bytes);
    uint8_t* p = map(mapped);
    large_.emplace(reinterpret_cast<uintptr_t>(p), mapped);
    in_use_ += bytes;
    return p;
  }
  const size_t pool_index = static_cast<size_t>(&pool_for(bytes) - pools_.data());
  Pool& pool = pools_[pool_index];
  Chunk* chunk = nullptr;
  for (Chunk* c : pool.chunks) {
    if (c->used < pool.blocks_per_chunk && c->huge == huge_pages_ && !c->split) {
      chunk = c;
      break;
    }
  }
  if (chunk == nullptr) {
    auto fresh = std::make_unique<Chunk>();
    fresh->base = map(kChunkBytes);
    fresh->huge = huge_pages_;
    fresh->pool = static_cast<uint32_t>(pool_index);
    chunk = fresh.get();
    chunks_.emplace(reinterpret_cast<uintptr_t>(chunk->base), std::move(fresh));
    pool.chunks.push_back(chunk);
  }
  // The lowest free block, so that a chunk's touched pages stay at its front.
  size_t i = 0;
  for (size_t w = 0; w < chunk->used_bits.size(); ++w) {
    if (~chunk->used_bits[w] != 0) {
      i = w * 64 + static_cast<size_t>(std::countr_zero(~chunk->used_bits[w]));
      break;
    }
  }
  assert(i < pool.blocks_per_chunk);
  chunk->set(i, true);
  ++chunk->used;
  in_use_ += bytes;
  return chunk->base + i * bytes;
}

void SegmentArena::discard(const Chunk& c, const Pool& p, size_t i) {
  const auto base = reinterpret_cast<uintptr_t>(c.base);
  const uintptr_t start = base + i * p.block_bytes;
  const uintptr_t end = start + p.block_bytes;
  uintptr_t lo = page_ceil(start);
  uintptr_t hi = page_floor(end);
  // A page this block shares with a neighbour goes too when that neighbour is free.
  if (lo != start && (i == 0 || !c.in_use(i - 1))) lo = page_floor(start);
  if (hi != end && (i + 1 >= p.blocks_per_chunk || !c.in_use(i + 1))) hi = page_ceil(end);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void SegmentArena::release(uint8_t* block, size_t bytes) {
  if (block == nullptr) return;
  in_use_ -= bytes;
  if (bytes < kMinChunkedBlock) {
    std::free(block);
    return;
  }
  if (bytes > kMaxChunkedBlock) {
    const auto it = large_.find(reinterpret_cast<uintptr_t>(block));
    assert(it != large_.end());
    unmap(block, it->second);
    large_.erase(it);
    return;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(block) & ~(uintptr_t{kChunkBytes} - 1);
  const auto it = chunks_.find(base);
  assert(it != chunks_.end());
  Chunk& c = *it->second;
  Pool& pool = pools_[c.pool];
  const size_t i = static_cast<size_t>(block - c.base) / bytes;
  c.set(i, false);
  --c.used;
  if (c.used > 0) {
    if (!c.huge || c.split) {
      discard(c, pool, i);
    } else if (size_t{c.used} * 2 <= pool.blocks_per_chunk) {
      c.split = true;  // half empty: memory matters more than its huge page now
      for (size_t k = 0; k < pool.blocks_per_chunk; ++k) {
        if (!c.in_use(k)) discard(c, pool, k);
      }
    }
    return;
  }
  pool.chunks.erase(std::find(pool.chunks.begin(), pool.chunks.end(), &c));
  unmap(c.base, kChunkBytes);
  chunks_.erase(it);
}

}  // namespace imhash
