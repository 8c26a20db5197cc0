// Latency-optimal allreduce for small chunks: recursive doubling (log2 N exchanges of the
// whole chunk), folding the ranks beyond the largest power of two in and out.
// Every exchange combines the two buffers in the same commutative way on both partners,
// so all ranks end with identical bits.
#pragma once

#include <memory>
#include <vector>

#include "runtime/collectives/chunk_op.hpp"
#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/core/dtype.hpp"

namespace chorus {

class exchange_op : public chunk_op {
 public:
  exchange_op(uint64_t sequence, int stream, int rank, int size, void* data, std::size_t count, dtype t,
              reduce_op op);

  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  void finish() override;
  bool needs(int peer) const override;

 private:
  void run(transport& t);
  void apply(std::size_t step, const std::byte* data);

  int size_;
  std::byte* data_;
  std::size_t count_;
  std::size_t bytes_;
  dtype dtype_;
  reduce_op op_;
  std::vector<exchange_step> steps_;
  std::size_t current_ = 0;                    // first step whose receive is not applied yet
  std::vector<bool> send_posted_;
  std::vector<std::vector<std::byte>> sendbuf_;  // our buffer as it was when step k's send began
  std::vector<std::vector<std::byte>> early_;    // frames for steps after current_
  std::vector<bool> have_early_;
};

/// Binomial-free pipelined chain broadcast: root sends segments to root+1, each rank
/// forwards each segment to its right neighbour as it arrives.
class broadcast_op : public chunk_op {
 public:
  broadcast_op(uint64_t sequence, int stream, int rank, int size, void* data, std::size_t bytes, int root,
               std::size_t segment_bytes);
  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  bool needs(int peer) const override {
    if (size_ == 1 || (started_ && recv_left_ == 0)) return false;
    return (pos_ != 0 && peer == left_) || (pos_ != size_ - 1 && peer == right_);
  }

 private:
  status check(int peer, const wire::frame_header& h) const;
  int size_, pos_, left_, right_;
  std::byte* data_;
  std::size_t bytes_;
  std::size_t segment_bytes_;
};

}  // namespace chorus
