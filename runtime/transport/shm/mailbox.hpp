// A two-slot mailbox from one rank to another on the same host, for the small collectives the
// calling thread runs itself (collectives/mailbox_allreduce.hpp), beside the I/O thread's rings.
// It lives in a segment of its own (segment.hpp): published counts posts made, released posts
// the receiver finished with, reader_sleeping is the receiver's futex word.
//
// Protocol (post k = 1, 2, ... in the order both ranks make their calls):
//  1. The writer waits until released >= k - 2 (slot k % 2 is free), copies a slot header
//     (k, bytes, tag, call) and the payload into slot k % 2, then stores published = k.
//  2. A reader about to sleep sets reader_sleeping, looks once more, then waits on the futex
//     while the word is still set. A writer that published clears the word and, if it was set,
//     wakes the futex. Both sides are sequentially consistent, so either the reader sees the
//     post or the writer sees the flag (ring.hpp step 3, with a futex instead of a socket).
//  3. The reader waits until published >= k, checks the slot (its k, its bytes within the slot,
//     published never more than one post ahead), uses the payload in place, then stores
//     released = k.
// Anyone (the I/O thread that saw the peer die) may wake a sleeping reader with wake().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/core/status.hpp"
#include "runtime/transport/shm/segment.hpp"

namespace chorus::shm {

/// Payload bytes one post carries at most.
constexpr std::size_t mailbox_slot_bytes = 64u << 10;
/// The segment capacity a mailbox needs (two slots with their headers).
std::size_t mailbox_capacity();

/// One post as the reader finds it: valid until release().
struct mail {
  uint64_t bytes = 0;
  uint64_t tag = 0;   ///< what the writer says the post is (the caller's encoding)
  uint64_t call = 0;  ///< which of the caller's calls it belongs to (the caller's numbering)
  const std::byte* payload = nullptr;
};

/// The sending side; one thread at a time.
class mailbox_writer {
 public:
  explicit mailbox_writer(std::unique_ptr<segment> seg) : seg_(std::move(seg)) {}
  /// Whether post k may be written now (step 1's wait).
  bool has_room(uint64_t k) const;
  /// Steps 1 and 2: `bytes` <= mailbox_slot_bytes; only after has_room(k).
  void post(uint64_t k, uint64_t tag, const void* payload, std::size_t bytes, uint64_t call = 0);
  /// post(), the payload gathered from `parts` in order (together <= mailbox_slot_bytes).
  void post(uint64_t k, uint64_t tag, std::span<const std::span<const std::byte>> parts, uint64_t call = 0);
  /// The payload of post k as this writer wrote it: unchanged until it writes post k + 2.
  const std::byte* posted(uint64_t k) const;

 private:
  std::unique_ptr<segment> seg_;
};

/// The receiving side; one thread at a time, except wake().
class mailbox_reader {
 public:
  mailbox_reader(std::unique_ptr<segment> seg, int peer) : seg_(std::move(seg)), peer_(peer) {}
  /// Post k if it arrived (true), not yet (false), or errc::protocol naming the peer and what
  /// is wrong with its slot.
  result<bool> take(uint64_t k, mail& out) const;
  /// Done with post k: its slot goes back to the writer.
  void release(uint64_t k);
  /// Step 2, the reader's half: unless post k arrived or `stop` is set, sleeps until a writer
  /// or wake() clears the flag, or `limit` passes.
  void sleep(uint64_t k, const std::atomic<bool>& stop, std::chrono::microseconds limit);
  /// Wakes a reader sleeping in sleep(); any thread. Set its `stop` first, so that a reader
  /// about to sleep sees one or the other.
  void wake();

 private:
  std::unique_ptr<segment> seg_;
  int peer_;
};

}  // namespace chorus::shm
