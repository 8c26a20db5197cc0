// Point-to-point transfers (torch.distributed's send and recv) as chunk ops: one rank moves
// `bytes` to one peer on a sequence number the two learned beforehand (the sender names it in its
// offer, p2p_matcher.hpp). The sender posts its bytes in segments, each frame carrying its offset
// (step 1 on the last frame, 0 on the others); the receiver takes exactly `bytes` into its buffer.
// An empty transfer is one empty last frame, so that a receiver expecting another length fails
// with errc::protocol instead of waiting. Sequences of point-to-point transfers come from
// p2p_sequence(), apart from every collective's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/collectives/chunk_op.hpp"

namespace chorus {

/// The sequence of `sender`'s n-th transfer (n counts from 0 per sender): the top bit set, above
/// the collectives' numbers and the pipeline's (data_plane::pipeline_sequence_base = 2^62), the
/// sender's rank in bits 40-62, n in bits 0-39. Unique per sender for 2^40 transfers.
uint64_t p2p_sequence(int sender, uint64_t n);
/// Whether `sequence` is one of p2p_sequence's, and the rank that sent it.
bool is_p2p_sequence(uint64_t sequence);
int p2p_sender(uint64_t sequence);

class p2p_send_op : public chunk_op {
 public:
  p2p_send_op(uint64_t sequence, int stream, int peer, const void* data, std::size_t bytes, std::size_t segment_bytes);
  void start(transport& t) override;
  std::byte* destination(int, const wire::frame_header&) override { return nullptr; }
  status delivered(transport&, int peer, const wire::frame_header& h, const std::byte*) override;
  bool needs(int peer) const override { return peer == peer_ && !complete(); }

 private:
  int peer_;
  const std::byte* data_;
  std::size_t bytes_, segment_bytes_;
};

class p2p_recv_op : public chunk_op {
 public:
  p2p_recv_op(uint64_t sequence, int stream, int peer, void* data, std::size_t bytes, std::size_t segment_bytes);
  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  bool needs(int peer) const override { return peer == peer_ && recv_left_ > 0; }

 private:
  status check(int peer, const wire::frame_header& h) const;
  int peer_;
  std::byte* data_;
  std::size_t bytes_, segment_bytes_;
};

}  // namespace chorus
