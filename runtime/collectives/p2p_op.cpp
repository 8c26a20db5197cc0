// Point-to-point send and receive of one transfer: segments with offsets, the last one marked.
#include "runtime/collectives/p2p_op.hpp"

#include <algorithm>
#include <cstring>

namespace chorus {

namespace {
constexpr uint32_t last_step = 1;
constexpr uint64_t p2p_bit = uint64_t{1} << 63;
constexpr int counter_bits = 40;
}  // namespace

uint64_t p2p_sequence(int sender, uint64_t n) {
  return p2p_bit | (static_cast<uint64_t>(sender) & ((uint64_t{1} << 23) - 1)) << counter_bits |
         (n & ((uint64_t{1} << counter_bits) - 1));
}

bool is_p2p_sequence(uint64_t sequence) { return (sequence & p2p_bit) != 0; }

int p2p_sender(uint64_t sequence) {
  return static_cast<int>((sequence & ~p2p_bit) >> counter_bits);
}

p2p_send_op::p2p_send_op(uint64_t sequence, int stream, int peer, const void* data, std::size_t bytes,
                         std::size_t segment_bytes)
    : chunk_op(sequence, stream),
      peer_(peer),
      data_(static_cast<const std::byte*>(data)),
      bytes_(bytes),
      segment_bytes_(std::max<std::size_t>(1, segment_bytes)) {
  set_layout({8, bytes_, segment_bytes_});
}

void p2p_send_op::start(transport& t) {
  started_ = true;
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(segment_bytes_, bytes_ - off);
    post(t, peer_, off + n == bytes_ ? last_step : 0, off, n ? data_ + off : nullptr, n);
    off += n;
  } while (off < bytes_);
}

status p2p_send_op::delivered(transport&, int peer, const wire::frame_header& h, const std::byte*) {
  return bad_frame(peer, h, "a send expects no frames");
}

p2p_recv_op::p2p_recv_op(uint64_t sequence, int stream, int peer, void* data, std::size_t bytes,
                         std::size_t segment_bytes)
    : chunk_op(sequence, stream),
      peer_(peer),
      data_(static_cast<std::byte*>(data)),
      bytes_(bytes),
      segment_bytes_(std::max<std::size_t>(1, segment_bytes)) {
  set_layout({8, bytes_, segment_bytes_});
}

void p2p_recv_op::start(transport&) {
  started_ = true;
  recv_left_ = bytes_ + 1;  // the bytes, and the last frame's mark
}

status p2p_recv_op::check(int peer, const wire::frame_header& h) const {
  const std::string expected = "expected a transfer of " + std::to_string(bytes_) + " bytes";
  if (peer != peer_) return bad_frame(peer, h, "this transfer comes from rank " + std::to_string(peer_));
  if (h.step > last_step || h.offset % segment_bytes_ != 0 || !range_inside(h.offset, h.length, 0, bytes_))
    return bad_frame(peer, h, expected);
  const bool last = h.step == last_step;
  if (last ? h.offset + h.length != bytes_ : h.length != segment_bytes_ || h.offset + h.length >= bytes_)
    return bad_frame(peer, h, expected);
  return {};
}

std::byte* p2p_recv_op::destination(int peer, const wire::frame_header& h) {
  return check(peer, h).ok() ? data_ + h.offset : nullptr;
}

status p2p_recv_op::delivered(transport&, int peer, const wire::frame_header& h, const std::byte* data) {
  if (auto st = check(peer, h); !st.ok()) return st;
  if (h.length && data != data_ + h.offset) std::memcpy(data_ + h.offset, data, h.length);
  const std::size_t got = h.length + (h.step == last_step ? 1 : 0);
  if (got > recv_left_) return bad_frame(peer, h, "more frames than the transfer holds");
  recv_left_ -= got;
  return {};
}

}  // namespace chorus
