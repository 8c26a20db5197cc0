// One direction of one stream between two ranks on one host: a ring of whole data frames
// (header and payload) in a shared segment, so a local peer's data never touches TCP.
//
// Protocol (both sides follow the same placement rule, so no offsets travel):
//  1. A frame occupies frame_header_size + length contiguous bytes at the ring's current
//     position. When it would run past the end, the sender skips to the start: it writes a
//     header of kind shm_pad where at least a header's worth of bytes is left (fewer are
//     skipped without one); the receiver skips the same way.
//  2. The sender copies frames in, then publishes: one release store of the bytes placed so
//     far (the segment's published counter). The receiver reads up to that counter and hands
//     room back through the released counter after it delivered a frame.
//  3. Wake-up: a receiver about to sleep sets the segment's reader_sleeping flag, then looks
//     at the ring once more; a sender that published clears the flag and, if it was set, rings
//     a doorbell (a header-only shm_wake frame on the stream's TCP connection). Both steps are
//     sequentially consistent, so either the receiver sees the frame or the sender sees the flag.
//  4. Everything read from the ring is checked like a frame from a socket: the header decoded
//     with the job's limits, the frame within the ring and within what was published, and the
//     published counter within the ring's capacity. A peer that breaks a rule gets a bad-frame
//     error naming it.
// A frame the ring cannot take right now waits or goes on TCP (the stream's choice), so a slow
// receiver never stalls the sender for long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/core/status.hpp"
#include "runtime/transport/shm/segment.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::shm {

/// The sending side; one thread (the transport's I/O thread).
class ring_writer {
 public:
  explicit ring_writer(std::unique_ptr<segment> seg) : seg_(std::move(seg)) {}
  /// Whether a frame of `length` payload bytes can ever go through this ring.
  bool fits(std::size_t length) const { return wire::frame_header_size + length <= seg_->capacity(); }
  /// Copies the frame in (step 1); false when the ring lacks the room now. Not visible to the
  /// receiver before publish().
  bool put(const wire::frame_header& h, const std::byte* payload);
  /// Makes the frames put so far visible (step 2); true when the receiver sleeps and needs a
  /// doorbell (step 3). Cheap when nothing was put since the last call.
  bool publish();
  std::size_t capacity() const { return seg_->capacity(); }

 private:
  std::unique_ptr<segment> seg_;
  uint64_t head_ = 0;       // bytes placed so far, padding included
  uint64_t published_ = 0;  // head_ at the last publish()
};

/// One frame found in the ring: its header and its payload in place (valid until consume()).
struct ring_frame {
  wire::frame_header header;
  const std::byte* payload = nullptr;
};

/// The receiving side; one thread (the transport's I/O thread).
class ring_reader {
 public:
  ring_reader(std::unique_ptr<segment> seg, wire::frame_limits limits) : seg_(std::move(seg)), limits_(limits) {}
  /// The next published frame, if any (step 4: errc::protocol saying what was wrong; the
  /// ring is then unusable). Call consume() once done with it before asking again.
  result<bool> next(ring_frame& out);
  /// The frame returned by next() is no longer needed: its room goes back to the sender.
  void consume();
  /// Step 3, the receiver's half: `sleeping` true before it blocks, false once awake.
  void set_sleeping(bool sleeping);
  /// Whether frames were published that next() has not returned (a hint for the poll loop).
  bool pending() const { return seg_->published().load(std::memory_order_seq_cst) != tail_; }
  std::size_t capacity() const { return seg_->capacity(); }

 private:
  std::unique_ptr<segment> seg_;
  wire::frame_limits limits_;
  uint64_t tail_ = 0;        // bytes consumed so far, padding included
  uint64_t frame_end_ = 0;   // tail_ after the frame next() returned
};

}  // namespace chorus::shm
