// Ring state machine: segment-level forwarding, reduction on the receiving I/O thread.
#include "runtime/collectives/ring_op.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "runtime/collectives/reduce.hpp"

namespace chorus {

ring_op::ring_op(uint64_t sequence, int stream, int rank, int size, std::byte* base, std::vector<byte_range> blocks,
                 std::vector<ring_step> steps, dtype t, reduce_op op, std::size_t segment_bytes, int divisor,
                 int divide_block)
    : ring_chunk_op(sequence, stream, rank, size, base, std::move(blocks), std::move(steps), t, op),
      divisor_(divisor),
      divide_block_(divide_block) {
  std::size_t e = size_of(t);
  segment_bytes_ = std::max(e, segment_bytes / e * e);
  std::size_t total = 0;
  for (auto& b : blocks_) total += b.length;
  if (size_ > 1)
    for (auto& s : steps_) send_left_ += blocks_[static_cast<std::size_t>(s.send_block)].length;
  set_layout({1, static_cast<uint64_t>(t), static_cast<uint64_t>(op), total, segment_bytes_,
              static_cast<uint64_t>(size), steps_.size(), blocks_.empty() ? 0 : blocks_.back().length});
}

void ring_op::start(transport& t) {
  started_ = true;
  if (size_ == 1 || steps_.empty()) return;
  for (auto& s : steps_) recv_left_ += blocks_[s.recv_block].length;
  const auto& first = blocks_[steps_[0].send_block];
  send_block(t, 0, first.offset, first.length);
}

void ring_op::send_block(transport& t, uint32_t step, std::size_t offset, std::size_t length) {
  for (std::size_t done = 0; done < length; done += segment_bytes_) {
    std::size_t n = std::min(segment_bytes_, length - done);
    post(t, right_, step, offset + done, base_ + offset + done, n);
  }
  send_left_ -= length;
}

status ring_op::check(int peer, const wire::frame_header& h) const {
  if (peer != left_) return bad_frame(peer, h, "expected frames from rank " + std::to_string(left_) + " only");
  if (h.step >= steps_.size()) return bad_frame(peer, h, "no such step");
  const auto& b = blocks_[steps_[h.step].recv_block];
  if (!range_inside(h.offset, h.length, b.offset, b.offset + b.length) || (h.offset - b.offset) % segment_bytes_ != 0)
    return bad_frame(peer, h, "outside block [" + std::to_string(b.offset) + ", " +
                                  std::to_string(b.offset + b.length) + ")");
  std::size_t want = std::min(segment_bytes_, b.offset + b.length - h.offset);
  if (h.length != want) return bad_frame(peer, h, "expected " + std::to_string(want) + " bytes");
  return {};
}

std::byte* ring_op::destination(int peer, const wire::frame_header& h) {
  if (!check(peer, h).ok() || steps_[h.step].reduce) return nullptr;
  return base_ + h.offset;
}

status ring_op::delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) {
  auto st = check(peer, h);
  if (!st.ok()) return st;
  std::byte* mine = base_ + h.offset;
  if (steps_[h.step].reduce) reduce_into(mine, data, h.length / size_of(dtype_), dtype_, op_);
  else if (data != mine) std::memcpy(mine, data, h.length);
  recv_left_ -= h.length;
  if (h.step + 1 < steps_.size()) {
    post(t, right_, h.step + 1, h.offset, mine, h.length);
    send_left_ -= h.length;
  }
  return {};
}

void ring_op::finish() {
  if (divisor_ <= 1) return;
  if (divide_block_ >= 0) {
    const auto& b = blocks_[static_cast<std::size_t>(divide_block_)];
    divide_by(base_ + b.offset, b.length / size_of(dtype_), dtype_, divisor_);
    return;
  }
  std::size_t total = 0;
  for (auto& b : blocks_) total += b.length;
  divide_by(base_, total / size_of(dtype_), dtype_, divisor_);
}

std::unique_ptr<chunk_op> make_ring_allreduce(uint64_t sequence, int stream, int rank, int size, void* data,
                                              std::size_t count, dtype t, reduce_op op, std::size_t segment_bytes) {
  std::vector<byte_range> blocks(size);
  std::size_t e = size_of(t);
  for (int b = 0; b < size; ++b) {
    std::size_t lo = block_begin(count, size, b), hi = block_begin(count, size, b + 1);
    blocks[b] = {lo * e, (hi - lo) * e};
  }
  int divisor = op == reduce_op::average ? size : 1;
  return std::make_unique<ring_op>(sequence, stream, rank, size, static_cast<std::byte*>(data), std::move(blocks),
                                   ring_allreduce_steps(rank, size), t, op, segment_bytes, divisor);
}

std::unique_ptr<chunk_op> make_ring_reducescatter(uint64_t sequence, int stream, int rank, int size, void* data,
                                                  const std::vector<byte_range>& slices, dtype t, reduce_op op,
                                                  std::size_t segment_bytes) {
  // After the reduce-scatter steps rank r owns block (r + 1) mod size: block b is the slice of
  // rank b - 1.
  std::vector<byte_range> blocks(static_cast<std::size_t>(size));
  for (int b = 0; b < size; ++b)
    blocks[static_cast<std::size_t>(b)] = slices[static_cast<std::size_t>((b + size - 1) % size)];
  int divisor = op == reduce_op::average ? size : 1;
  return std::make_unique<ring_op>(sequence, stream, rank, size, static_cast<std::byte*>(data), std::move(blocks),
                                   ring_reducescatter_steps(rank, size), t, op, segment_bytes, divisor,
                                   (rank + 1) % size);
}

std::unique_ptr<chunk_op> make_ring_allgather(uint64_t sequence, int stream, int rank, int size, void* out,
                                              const std::vector<std::size_t>& counts, dtype t,
                                              std::size_t segment_bytes) {
  std::vector<byte_range> blocks(size);
  std::size_t e = size_of(t), at = 0;
  for (int b = 0; b < size; ++b) {
    blocks[b] = {at, counts[b] * e};
    at += counts[b] * e;
  }
  return make_ring_allgather(sequence, stream, rank, size, out, std::move(blocks), t, segment_bytes);
}

std::unique_ptr<chunk_op> make_ring_allgather(uint64_t sequence, int stream, int rank, int size, void* out,
                                              std::vector<byte_range> blocks, dtype t, std::size_t segment_bytes) {
  return std::make_unique<ring_op>(sequence, stream, rank, size, static_cast<std::byte*>(out), std::move(blocks),
                                   ring_allgather_steps(rank, size), t, reduce_op::sum, segment_bytes, 1);
}

}  // namespace chorus
