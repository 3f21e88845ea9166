// Big-endian integer reads and writes on raw bytes, for the codecs. Pure; any thread.
// Callers check bounds before calling: these functions do not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace imhash::bytes {

inline uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline uint64_t get_u64(const uint8_t* p) { return uint64_t{get_u32(p)} << 32 | get_u32(p + 4); }

inline void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put_u32(uint8_t* p, uint32_t v) {
  put_u16(p, static_cast<uint16_t>(v >> 16));
  put_u16(p + 2, static_cast<uint16_t>(v));
}
inline void put_u64(uint8_t* p, uint64_t v) {
  put_u32(p, static_cast<uint32_t>(v >> 32));
  put_u32(p + 4, static_cast<uint32_t>(v));
}

// Appends to a growing buffer; the vector keeps its capacity between uses.
class Appender {
 public:
  explicit Appender(std::vector<uint8_t>& out) : out_(out) {}
  size_t size() const { return out_.size(); }
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put_u16(grow(2), v); }
  void u32(uint32_t v) { put_u32(grow(4), v); }
  void u64(uint64_t v) { put_u64(grow(8), v); }
  void raw(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  void patch_u32(size_t at, uint32_t v) { put_u32(out_.data() + at, v); }

 private:
  uint8_t* grow(size_t n) {
    out_.resize(out_.size() + n);
    return out_.data() + out_.size() - n;
  }
  std::vector<uint8_t>& out_;
};

// Writes at a cursor into a buffer the caller has sized (no bounds checks, like put_*). Pass it by
// value and return it: a store through uint8_t* may alias a Writer the compiler cannot keep in a
// register (one behind a reference), which makes it reload and store the cursor at every byte.
class Writer {
 public:
  explicit Writer(uint8_t* p) : p_(p) {}
  uint8_t* pos() const { return p_; }
  void u8(uint8_t v) { *p_++ = v; }
  void u16(uint16_t v) { put_u16(advance(2), v); }
  void u32(uint32_t v) { put_u32(advance(4), v); }
  void u64(uint64_t v) { put_u64(advance(8), v); }
  void raw(const uint8_t* p, size_t n) { p_ = std::copy_n(p, n, p_); }
  void fill(size_t n, uint8_t v) { p_ = std::fill_n(p_, n, v); }

 private:
  uint8_t* advance(size_t n) {
    uint8_t* at = p_;
    p_ += n;
    return at;
  }
  uint8_t* p_;
};

// Reads with bounds checks; after any overrun ok() stays false and reads return 0.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool ok() const { return ok_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  uint8_t u8() { return take(1) ? p_[-1] : 0; }
  uint16_t u16() { return take(2) ? get_u16(p_ - 2) : 0; }
  uint32_t u32() { return take(4) ? get_u32(p_ - 4) : 0; }
  uint64_t u64() { return take(8) ? get_u64(p_ - 8) : 0; }
  const uint8_t* raw(size_t n) { return take(n) ? p_ - n : nullptr; }

 private:
  bool take(size_t n) {
    if (!ok_ || left() < n) {
      ok_ = false;
      return false;
    }
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace imhash::bytes
