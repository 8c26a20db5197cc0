// Hierarchical allreduce or allgather of one chunk (hier_schedule.hpp's, hier_allgather.hpp's
// steps) as a chunk op: driven frame
// by frame on the I/O thread like ring_op, never blocking. Phases follow each other segment by
// segment, not chunk by chunk (hier_readiness.hpp): a segment goes on to the cross-host ring once the
// host has reduced it, and to the allgather inside the host once it is final, while the rest of
// the chunk is still on its way; so one chunk keeps the link busy while its other segments run
// inside the host. A frame whose bytes are not ready for its phase yet is copied aside and
// consumed when they are. Inside a phase each ring forwards a segment as soon as it has been
// reduced, as ring_op does.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "runtime/collectives/chunk_op.hpp"
#include "runtime/collectives/hier_readiness.hpp"
#include "runtime/collectives/hier_schedule.hpp"

namespace chorus {

class hier_op final : public chunk_op {
 public:
  /// `variant` is hier_sharded or hier_leader; reduce_op::average divides the result at the end.
  /// Frames are at most `segment_bytes` (hier_segment_bytes picks it for a chunk).
  hier_op(uint64_t sequence, int stream, const host_groups& g, int rank, void* data, std::size_t count, dtype t,
          reduce_op op, std::size_t segment_bytes, allreduce_choice variant);
  /// Any step list over `total_bytes` of `data` (an allgather's: no step reduces). `layout`
  /// goes into the layout tag with the sizes; it must differ between step-list builders.
  hier_op(uint64_t sequence, int stream, std::vector<hier_step> steps, void* data, std::size_t total_bytes, dtype t,
          reduce_op op, std::size_t segment_bytes, int divisor, uint64_t layout, uint64_t shape);

  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  void finish() override;
  bool needs(int peer) const override;

 private:
  struct held {
    std::size_t step;
    wire::frame_header header;
    std::vector<std::byte> payload;
  };
  struct waiting_send {
    std::size_t step;
    std::size_t offset, length;  ///< one segment of the step's send
  };
  struct peer_left {
    uint64_t recv = 0;  ///< bytes still expected from the peer
    uint64_t send = 0;  ///< bytes not yet posted to the peer
  };
  /// The step whose receive `h` from `peer` belongs to, or an error.
  result<std::size_t> match(int peer, const wire::frame_header& h) const;
  void send_range(transport& t, const hier_transfer& to, std::size_t offset, std::size_t length);
  status consume(transport& t, std::size_t step, const wire::frame_header& h, const std::byte* data);
  /// Posts the waiting sends and consumes the held frames whose bytes became ready, until none does.
  status flush(transport& t);

  std::byte* base_;
  std::size_t total_bytes_;
  std::vector<hier_step> steps_;
  hier_readiness gate_;
  std::map<uint16_t, std::size_t> by_wire_;  ///< receive wire id -> step
  std::vector<uint64_t> step_left_;          ///< receive bytes still expected, by step
  std::map<int, peer_left> peers_;
  std::vector<held> held_;
  std::vector<waiting_send> waiting_;  ///< segments of the steps that send without a receive first
  dtype dtype_;
  reduce_op op_;
  std::size_t segment_bytes_;
  int divisor_;
};

/// Builds the op for `variant` (hier_sharded or hier_leader).
std::unique_ptr<chunk_op> make_hier_allreduce(uint64_t sequence, int stream, const host_groups& g, int rank,
                                              void* data, std::size_t count, dtype t, reduce_op op,
                                              std::size_t segment_bytes, allreduce_choice variant);

/// Hierarchical allgather of one chunk (hier_allgather.hpp): blocks[r] is where rank r's block
/// lies in `out`; ours is in place already.
std::unique_ptr<chunk_op> make_hier_allgather(uint64_t sequence, int stream, const host_groups& g, int rank, void* out,
                                              const std::vector<hier_block>& blocks, dtype t,
                                              std::size_t segment_bytes);

}  // namespace chorus
