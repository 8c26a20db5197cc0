// Alltoall state machine: direct sends to every peer, receives checked against expected sizes.
#include "runtime/collectives/alltoall_op.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/core/log.hpp"

namespace chorus {

namespace {
constexpr uint32_t last_step = 1;  // step of a block's last frame; 0 for the others
}

alltoall_op::alltoall_op(uint64_t sequence, int stream, int rank, int size, const void* in,
                         std::vector<byte_range> send, void* out, std::vector<byte_range> recv,
                         std::size_t element_bytes, std::size_t segment_bytes)
    : chunk_op(sequence, stream),
      rank_(rank),
      size_(size),
      in_(static_cast<const std::byte*>(in)),
      out_(static_cast<std::byte*>(out)),
      send_(std::move(send)),
      recv_(std::move(recv)),
      left_(static_cast<std::size_t>(size), 0) {
  std::size_t e = std::max<std::size_t>(1, element_bytes);
  segment_bytes_ = std::max(e, segment_bytes / e * e);
  const auto me = static_cast<std::size_t>(rank);
  if (send_.size() != static_cast<std::size_t>(size) || recv_.size() != static_cast<std::size_t>(size) ||
      send_[me].length != recv_[me].length) {
    CHORUS_LOG(error, "alltoall", "broken invariant: sequence=" << sequence << " rank=" << rank << " size=" << size
                                      << " send blocks=" << send_.size() << " recv blocks=" << recv_.size()
                                      << " own send/recv bytes=" << (me < send_.size() ? send_[me].length : 0) << "/"
                                      << (me < recv_.size() ? recv_[me].length : 0));
    std::abort();
  }
  set_layout({4, e, segment_bytes_, static_cast<uint64_t>(size)});
}

void alltoall_op::start(transport& t) {
  started_ = true;
  const auto me = static_cast<std::size_t>(rank_);
  if (recv_[me].length && out_ + recv_[me].offset != in_ + send_[me].offset)
    std::memmove(out_ + recv_[me].offset, in_ + send_[me].offset, recv_[me].length);
  // recv_left_ counts the bytes still expected plus one per peer whose last frame is missing.
  for (int j = 0; j < size_; ++j)
    if (j != rank_) left_[static_cast<std::size_t>(j)] = recv_[static_cast<std::size_t>(j)].length + 1;
  for (auto l : left_) recv_left_ += l;
  for (int k = 1; k < size_; ++k) {
    int peer = (rank_ + k) % size_;
    const auto& b = send_[static_cast<std::size_t>(peer)];
    std::size_t off = 0;
    do {
      std::size_t n = std::min(segment_bytes_, b.length - off);
      bool last = off + n == b.length;
      post(t, peer, last ? last_step : 0, off, n ? in_ + b.offset + off : nullptr, n);
      off += n;
    } while (off < b.length);
  }
}

status alltoall_op::check(int peer, const wire::frame_header& h) const {
  if (peer < 0 || peer >= size_ || peer == rank_) return bad_frame(peer, h, "not a peer of this alltoall");
  const std::size_t want = recv_[static_cast<std::size_t>(peer)].length;
  const std::string expected = "expected a block of " + std::to_string(want) + " bytes";
  if (h.step > last_step || h.offset % segment_bytes_ != 0 || !range_inside(h.offset, h.length, 0, want))
    return bad_frame(peer, h, expected);
  bool last = h.step == last_step;
  if (last ? h.offset + h.length != want : h.length != segment_bytes_ || h.offset + h.length >= want)
    return bad_frame(peer, h, expected);
  return {};
}

std::byte* alltoall_op::destination(int peer, const wire::frame_header& h) {
  if (!check(peer, h).ok()) return nullptr;
  return out_ + recv_[static_cast<std::size_t>(peer)].offset + h.offset;
}

status alltoall_op::delivered(transport&, int peer, const wire::frame_header& h, const std::byte* data) {
  auto st = check(peer, h);
  if (!st.ok()) return st;
  std::byte* dest = out_ + recv_[static_cast<std::size_t>(peer)].offset + h.offset;
  if (h.length && data != dest) std::memcpy(dest, data, h.length);
  std::size_t got = h.length + (h.step == last_step ? 1 : 0);
  auto& left = left_[static_cast<std::size_t>(peer)];
  if (got > left) return bad_frame(peer, h, "more frames than its block holds");
  left -= got;
  recv_left_ -= got;
  return {};
}

bool alltoall_op::needs(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) return false;
  return !started_ || left_[static_cast<std::size_t>(peer)] > 0;
}

}  // namespace chorus
