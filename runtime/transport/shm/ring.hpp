// One direction of one stream between two ranks on one host: a byte ring in a shared segment.
// The sender copies a data frame's payload into the ring and sends only the frame's header,
// as kind shm_data, over the stream's TCP connection; the receiver, reading that header, finds
// the payload at the ring's next place. Both sides place frames by the same rule, so the
// header needs no ring offset: a payload goes at the current position, or at the ring's start
// when it would run past the end. Ordering comes from the TCP stream (headers arrive in the
// order the payloads were placed); the receiver hands space back through the segment's
// released counter. A payload the ring cannot take right now travels on TCP as usual, so a
// slow receiver never stalls the sender.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/transport/shm/segment.hpp"

namespace chorus::shm {

/// The sending side; one thread (the transport's I/O thread).
class ring_writer {
 public:
  explicit ring_writer(std::unique_ptr<segment> seg) : seg_(std::move(seg)) {}
  /// Where `len` bytes go now, or nullptr when the ring lacks the room (the frame then goes
  /// on TCP). A non-null answer commits: the receiver will look for these bytes next.
  std::byte* reserve(std::size_t len);
  /// Call after copying payloads in and before the headers go out.
  static void publish();
  std::size_t capacity() const { return seg_->capacity(); }

 private:
  std::unique_ptr<segment> seg_;
  uint64_t head_ = 0;  // bytes placed so far, padding at the wrap included
};

/// The receiving side; one thread (the transport's I/O thread).
class ring_reader {
 public:
  explicit ring_reader(std::unique_ptr<segment> seg) : seg_(std::move(seg)) {}
  /// Where the payload of the next shm_data frame (`len` bytes) lies; call after its header
  /// arrived. nullptr when `len` cannot be in the ring (a bad frame).
  const std::byte* next(std::size_t len);
  /// The bytes of the frame returned by next() are no longer needed: the sender may reuse them.
  void release();
  std::size_t capacity() const { return seg_->capacity(); }

 private:
  std::unique_ptr<segment> seg_;
  uint64_t tail_ = 0;  // bytes consumed so far, padding at the wrap included
};

}  // namespace chorus::shm
