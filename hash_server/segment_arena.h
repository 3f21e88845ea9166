// SegmentArena: where one shard's segment arrays come from, so that the memory the process holds
// follows the records it stores, both ways.
//
// Why not malloc: a store that grows rehashes each segment into a larger array and frees the old
// one, and a purge shrinks them again. glibc keeps freed arrays in its heap (its mmap threshold
// rises after the first free of a mapped chunk), so the process would keep the high-water mark of
// every size it ever used. Here blocks of 16 KiB and more come from 2 MiB chunks, one set of
// chunks per block size, mapped 2 MiB aligned; a freed block's whole pages go back to the kernel at
// once (madvise MADV_DONTNEED, also the pages it shares with free neighbours) and a chunk whose
// blocks are all free is unmapped. Smaller blocks come from malloc (a store's smallest segments
// live only while it is young); blocks above a quarter chunk get a mapping of their own.
//
// Huge pages: with set_huge_pages(true), new chunks are marked MADV_HUGEPAGE. A touched huge page
// is resident whole, so the store switches this on only once it is large enough that a partly
// used 2 MiB chunk per block size is a small share of it (record_store.h). Giving back one freed
// block of a huge page splits it into 4 KiB pages for good, and a growing store frees and reuses
// every block again and again (each rebuild moves a segment to another block): measured at 5M
// records, 10 of 54 chunks were still huge. So a huge chunk keeps its freed blocks resident until
// it is half empty; then it gives back all of its free blocks, and like the chunks mapped before
// huge pages were asked for, it only drains from then on: new blocks come from whole huge chunks.
//
// Not thread-safe: one store's thread (the shard's) only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace imhash {

class SegmentArena {
 public:
  static constexpr size_t kChunkBytes = size_t{2} << 20;
  static constexpr size_t kPageBytes = 4096;
  static constexpr size_t kMinChunkedBlock = size_t{16} << 10;  // smaller: malloc
  static constexpr size_t kMaxChunkedBlock = kChunkBytes / 4;   // larger: a mapping of its own

  SegmentArena() = default;
  ~SegmentArena();
  SegmentArena(const SegmentArena&) = delete;
  SegmentArena& operator=(const SegmentArena&) = delete;

  // A block of `bytes` (a multiple of 64), 64-byte aligned, contents unspecified. Throws
  // std::bad_alloc when the kernel refuses memory.
  uint8_t* allocate(size_t bytes);
  // Gives back a block from allocate() with the same `bytes`.
  void release(uint8_t* block, size_t bytes);

  void set_huge_pages(bool on) { huge_pages_ = on; }
  bool huge_pages() const { return huge_pages_; }
  // Bytes of the blocks handed out and not released.
  size_t bytes_in_use() const { return in_use_; }
  // Bytes of address space mapped for chunks and large blocks (resident or not).
  size_t bytes_mapped() const { return mapped_; }

 private:
  static constexpr size_t kMaxBlocksPerChunk = kChunkBytes / kMinChunkedBlock;  // 128

  struct Chunk {
    uint8_t* base = nullptr;
    uint32_t pool = 0;
    uint32_t used = 0;
    bool huge = false;   // mapped with MADV_HUGEPAGE
    bool split = false;  // a huge chunk whose free blocks were given back (now 4 KiB pages)
    std::array<uint64_t, kMaxBlocksPerChunk / 64> used_bits{};
    bool in_use(size_t i) const { return (used_bits[i / 64] >> (i % 64)) & 1; }
    void set(size_t i, bool on);
  };
  struct Pool {
    size_t block_bytes = 0;
    uint32_t blocks_per_chunk = 0;
    std::vector<Chunk*> chunks;  // in the order mapped; allocation takes the first free block
  };

  uint8_t* map(size_t bytes);
  void unmap(uint8_t* p, size_t bytes);
  Pool& pool_for(size_t bytes);
  // Returns the pages of block `i` of `c` to the kernel, with the pages it shares with free
  // neighbours (or with the chunk's unused tail).
  void discard(const Chunk& c, const Pool& p, size_t i);

  std::vector<Pool> pools_;
  std::unordered_map<uintptr_t, std::unique_ptr<Chunk>> chunks_;  // by base address
  std::unordered_map<uintptr_t, size_t> large_;                   // own mappings: bytes mapped
  size_t in_use_ = 0;
  size_t mapped_ = 0;
  bool huge_pages_ = false;
};

}  // namespace imhash
