// StreamBuffer: the receive buffer of one byte stream (a TCP connection). Reads append at the end,
// whole messages are taken from the front, and what is left of an incomplete message is moved to
// the start when the free space runs out, so every read gets one contiguous span. The storage is
// allocated at the first read (a connection that never sends costs nothing) and never zero-filled.
//
// Frames are taken with drain_frames() (common/codec/frame_protocol.h) or next_message()
// (common/routing/control_protocol.h) on data(), then consume(). Not thread-safe: the owning
// connection's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

namespace imhash {

class StreamBuffer {
 public:
  // `capacity` must hold the largest message the stream may carry, plus room for pipelining; or
  // the buffer starts at `capacity` and grows, one message at a time, up to `limit` (expect()).
  explicit StreamBuffer(size_t capacity, size_t limit = 0)
      : initial_(capacity), capacity_(capacity), limit_(limit > capacity ? limit : capacity) {}

  // Where the next read goes: never empty unless the buffer is full of one unfinished message
  // (which a bounded decoder refuses before that can happen). Call it after taking every whole
  // message from data().
  std::span<uint8_t> space() {
    if (!storage_) storage_ = std::make_unique_for_overwrite<uint8_t[]>(capacity_);
    if (begin_ > 0) compact();  // what is left is the start of one message: a short move
    return {storage_.get() + end_, capacity_ - end_};
  }
  void commit(size_t n) { end_ += n; }

  // The bytes received and not yet consumed.
  std::span<const uint8_t> data() const { return {storage_.get() + begin_, end_ - begin_}; }
  bool empty() const { return begin_ == end_; }
  void consume(size_t n) {
    begin_ += n;
    if (begin_ != end_) return;
    begin_ = end_ = 0;  // the common case: everything read was whole
    if (capacity_ > initial_) release();
  }

  // Bytes that arrived before this buffer took over the stream (read past a handshake).
  void append(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    std::span<uint8_t> s = space();
    const size_t n = bytes.size() < s.size() ? bytes.size() : s.size();
    std::memcpy(s.data(), bytes.data(), n);
    commit(n);
  }
  // The message at the front is `size` bytes long (its length prefix has arrived): make room for
  // all of it. False if that is above the limit (the stream is unusable). Once the buffer is empty
  // again it goes back to its first capacity, so one large message does not keep memory.
  bool expect(size_t size) {
    if (size <= capacity_) return true;
    if (size > limit_) return false;
    auto bigger = std::make_unique_for_overwrite<uint8_t[]>(size);
    if (storage_) std::memcpy(bigger.get(), storage_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    storage_ = std::move(bigger);
    capacity_ = size;
    return true;
  }
  // Frees the storage if nothing is buffered (an idle connection); space() allocates it again.
  void release() {
    if (empty()) storage_.reset(), begin_ = end_ = 0, capacity_ = initial_;
  }
  size_t capacity() const { return capacity_; }

 private:
  void compact() {
    std::memmove(storage_.get(), storage_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }

  const size_t initial_;
  size_t capacity_;
  const size_t limit_;
  std::unique_ptr<uint8_t[]> storage_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace imhash
