// Pipelined ring over blocks of one buffer: ring allreduce, ring reduce-scatter (the first half
// of ring allreduce) and ring allgather(v).
// Each block is cut into segments; a segment received in step g is forwarded in step g+1 as
// soon as it has been reduced, so every step overlaps the next.
#pragma once

#include <memory>
#include <vector>

#include "runtime/collectives/chunk_op.hpp"
#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/core/dtype.hpp"

namespace chorus {

struct byte_range {
  std::size_t offset = 0;
  std::size_t length = 0;
};

/// What every ring op holds: its place in the ring, the buffer with its blocks (Range: where a
/// block lies, in bytes or in elements), the steps, the element type and the reduction.
template <class Range>
class ring_chunk_op : public chunk_op {
 protected:
  ring_chunk_op(uint64_t sequence, int stream, int rank, int size, std::byte* base, std::vector<Range> blocks,
                std::vector<ring_step> steps, dtype t, reduce_op op)
      : chunk_op(sequence, stream),
        rank_(rank),
        size_(size),
        left_((rank + size - 1) % size),
        right_((rank + 1) % size),
        base_(base),
        blocks_(std::move(blocks)),
        steps_(std::move(steps)),
        dtype_(t),
        op_(op) {}

  int rank_, size_, left_, right_;
  std::byte* base_;
  std::vector<Range> blocks_;
  std::vector<ring_step> steps_;
  dtype dtype_;
  reduce_op op_;
};

class ring_op : public ring_chunk_op<byte_range> {
 public:
  /// `blocks[b]` is where block b lies in `base`; `divisor` > 1 divides the result at the end:
  /// every block, or only block `divide_block` when it is >= 0 (reduce-scatter: the one block
  /// this rank ends up owning).
  ring_op(uint64_t sequence, int stream, int rank, int size, std::byte* base, std::vector<byte_range> blocks,
          std::vector<ring_step> steps, dtype t, reduce_op op, std::size_t segment_bytes, int divisor,
          int divide_block = -1);

  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  void finish() override;
  /// The left neighbour while frames from it are due, the right one while we have frames left
  /// to post to it: a right neighbour that finished and left cleanly fails nothing here.
  bool needs(int peer) const override {
    if (size_ == 1 || (started_ && recv_left_ == 0)) return false;
    return (peer == left_ && (!started_ || recv_left_ > 0)) || (peer == right_ && send_left_ > 0);
  }

 private:
  void send_block(transport& t, uint32_t step, std::size_t offset, std::size_t length);
  status check(int peer, const wire::frame_header& h) const;

  std::size_t segment_bytes_;
  int divisor_;
  int divide_block_;
  uint64_t send_left_ = 0;  ///< payload bytes still to post to the right neighbour
};

/// Ring allreduce of one chunk (in place).
std::unique_ptr<chunk_op> make_ring_allreduce(uint64_t sequence, int stream, int rank, int size, void* data,
                                              std::size_t count, dtype t, reduce_op op, std::size_t segment_bytes);
/// Ring reduce-scatter of one chunk, in place: `slices[r]` is rank r's part of `data` (byte
/// ranges of whole elements, identical on every rank; any may be empty, they need not be
/// adjacent). Every slice serves as scratch; when the op ends, slices[rank] holds the
/// reduction over all ranks of their slices[rank] (average: divided by size). It runs the
/// reduce-scatter steps of ring allreduce, with the blocks numbered so that each rank ends
/// owning its own slice.
std::unique_ptr<chunk_op> make_ring_reducescatter(uint64_t sequence, int stream, int rank, int size, void* data,
                                                  const std::vector<byte_range>& slices, dtype t, reduce_op op,
                                                  std::size_t segment_bytes);
/// Ring allgather: `out` holds counts[r] elements of rank r, in rank order; our part is
/// already in place.
std::unique_ptr<chunk_op> make_ring_allgather(uint64_t sequence, int stream, int rank, int size, void* out,
                                              const std::vector<std::size_t>& counts, dtype t,
                                              std::size_t segment_bytes);
/// Ring allgather of given blocks: blocks[r] (bytes of `out`, whole elements) is rank r's,
/// ours in place already; they need not be adjacent (one window of every rank's block).
std::unique_ptr<chunk_op> make_ring_allgather(uint64_t sequence, int stream, int rank, int size, void* out,
                                              std::vector<byte_range> blocks, dtype t, std::size_t segment_bytes);

}  // namespace chorus
