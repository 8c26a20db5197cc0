// Alltoall(v) of one chunk as a state machine: rank r sends block send[i] of its input to rank
// i and receives block recv[j] of its output from rank j; its own block is copied locally.
// All sends are posted at start (to r+1, r+2, ... so that no peer is everybody's first), cut
// into segments. Frames carry (step = 1 on the last frame of a block, offset inside the block);
// every block, even an empty one, ends with one such last frame, so a receiver whose expected
// size differs from what its peer sends fails with errc::protocol instead of waiting forever.
#pragma once

#include <memory>
#include <vector>

#include "runtime/collectives/chunk_op.hpp"
#include "runtime/collectives/ring_op.hpp"

namespace chorus {

class alltoall_op : public chunk_op {
 public:
  /// `send[i]`: byte range of `in` for rank i; `recv[j]`: byte range of `out` that rank j
  /// fills (it must be rank j's send[rank]). send[rank] and recv[rank] must have one length
  /// (checked: a broken invariant aborts). Segments are rounded down to whole elements.
  alltoall_op(uint64_t sequence, int stream, int rank, int size, const void* in, std::vector<byte_range> send,
              void* out, std::vector<byte_range> recv, std::size_t element_bytes, std::size_t segment_bytes);

  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  bool needs(int peer) const override;

 private:
  status check(int peer, const wire::frame_header& h) const;

  int rank_, size_;
  const std::byte* in_;
  std::byte* out_;
  std::vector<byte_range> send_, recv_;
  std::size_t segment_bytes_;
  std::vector<uint64_t> left_;  // by peer: bytes still expected, + 1 until its last frame arrived
};

}  // namespace chorus
