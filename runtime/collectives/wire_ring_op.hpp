// The ring (allreduce, reduce-scatter, allgather) with compression on the wire and the NaN/Inf
// check (runtime/compression/cast.hpp). Compressed: a segment of f32/f64 data is cast to
// fp16/bf16 as it is sent; received halves are reduced into f32 accumulators (the f32 buffer
// itself, or scratch for f64); the owner of a block divides (average), casts the final value
// once, and the allgather phase forwards those wire bytes unchanged, so every rank widens the
// same bits into its buffer. Checked: each rank notes whether its own input held NaN/Inf while
// reading it anyway (plain sums: the block it sends first is checked by the neighbour that
// receives it), and after that a bitmap of such ranks travels the ring (size-1 small frames,
// ORed on the way), so every rank ends with the same bitmap.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/collectives/chunk_op.hpp"
#include "runtime/collectives/nonfinite_report.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/compression/cast.hpp"
#include "runtime/core/dtype.hpp"

namespace chorus {

/// Scratch bytes for the wire buffers, reused across ops (fresh pages would cost a page fault
/// per 4 KiB on every chunk). Uninitialised; returned to a small process-wide pool when freed.
class wire_scratch {
 public:
  wire_scratch() = default;
  explicit wire_scratch(std::size_t bytes);
  ~wire_scratch();
  wire_scratch(wire_scratch&& o) noexcept : p_(std::move(o.p_)), cap_(o.cap_) { o.cap_ = 0; }
  wire_scratch& operator=(wire_scratch&& o) noexcept;
  std::byte* data() { return p_.get(); }

 private:
  std::unique_ptr<std::byte[]> p_;
  std::size_t cap_ = 0;
};

struct wire_options {
  compression wire = compression::none;  ///< fp16/bf16: f32/f64 data only, sum or average
  bool check = false;                    ///< NaN/Inf check: needs `report`
  float prescale = 1.0f;                 ///< own input times this before the sum (f32/f64 only)
  std::shared_ptr<nonfinite_report> report;
};

/// Where a block lies, in elements.
struct elem_range {
  std::size_t offset = 0;
  std::size_t count = 0;
};

class wire_ring_op final : public ring_chunk_op<elem_range> {
 public:
  /// `blocks` in elements of `t`; `owned_divisor` > 1 divides the blocks this rank finalises
  /// (average); `reduce` false: an allgather (each rank's own block is final at once).
  wire_ring_op(uint64_t sequence, int stream, int rank, int size, std::byte* base, std::vector<elem_range> blocks,
               std::vector<ring_step> steps, dtype t, reduce_op op, std::size_t segment_bytes, int owned_divisor,
               int own_block, wire_options opts);

  void start(transport& t) override;
  std::byte* destination(int peer, const wire::frame_header& h) override;
  status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) override;
  void finish() override;
  /// The left neighbour while frames are due from it, the right one while we still have frames
  /// to hand it: a right neighbour that got everything and left cleanly fails nothing here.
  bool needs(int peer) const override {
    if (size_ <= 1) return false;
    if (!started_) return peer == left_ || peer == right_;
    return (peer == left_ && recv_left_ > 0) || (peer == right_ && send_left_ > 0);
  }

 private:
  bool compressed() const { return opts_.wire != compression::none; }
  /// Plain f32/f64 sum or average: the check rides in the reduction of received blocks.
  bool fused_check() const {
    return (dtype_ == dtype::f32 || dtype_ == dtype::f64) && (op_ == reduce_op::sum || op_ == reduce_op::average);
  }
  /// Plain checked sum/average without prescale: the block a rank sends first is checked by its
  /// right neighbour as it arrives there (step 0 carries it unchanged), in the pass that adds it
  /// (add_checked_both), instead of a scan of the whole block before the first frame leaves.
  bool neighbour_checks_first() const {
    return !compressed() && opts_.check && fused_check() && opts_.prescale == 1.0f && size_ > 1 && !steps_.empty() &&
           steps_.front().reduce;
  }
  std::size_t elem_of_offset(uint64_t wire_offset) const { return wire_offset / unit_; }
  status check(int peer, const wire::frame_header& h) const;
  void send_range(transport& t, uint32_t step, const std::byte* from, std::size_t e0, std::size_t n);
  void read_own(std::size_t n, bool nonfinite);
  // Rounds (compressed) or leaves (plain) the final values of [e0, e0+n) of an owned block,
  // from the f32 accumulators; returns where the wire bytes to forward start.
  const std::byte* finalise(std::size_t e0, std::size_t n, bool from_accumulator);
  void send_flags(transport& t);
  void send_frame(transport& t, uint32_t step, uint64_t offset, const std::byte* payload, std::size_t len);
  float* accumulator(std::size_t e0);
  std::byte* own(std::size_t e0) { return base_ + e0 * esize_; }

  std::size_t esize_;      // bytes per element of the caller's dtype
  std::size_t unit_;       // bytes per element on the wire
  std::size_t seg_elems_;  // elements per segment
  int divisor_;
  int own_block_;          // the block this rank finalises (-1: none)
  wire_options opts_;
  wire_scratch send_wire_;    // reduce-scatter phase: casts of partial sums
  wire_scratch gather_wire_;  // final values in the wire type
  wire_scratch acc64_;        // f64 data: f32 accumulators
  uint64_t send_left_ = 0;              // payload bytes not yet handed to the transport
  std::size_t own_left_ = 0;            // own elements not yet read (check)
  bool own_bad_ = false;
  std::vector<uint64_t> flags_;
  std::size_t flag_bytes_ = 0;
  std::size_t flags_sent_ = 0, flags_received_ = 0;
  std::vector<std::vector<uint64_t>> flag_out_;  // payloads of our flag frames
};

/// Ring allreduce of one chunk in place, compressed and/or checked (`opts`).
std::unique_ptr<chunk_op> make_wire_ring_allreduce(uint64_t sequence, int stream, int rank, int size, void* data,
                                                   std::size_t count, dtype t, reduce_op op, std::size_t segment_bytes,
                                                   wire_options opts);
/// Ring reduce-scatter (as make_ring_reducescatter: `slices` in bytes of `t`), compressed
/// and/or checked.
std::unique_ptr<chunk_op> make_wire_ring_reducescatter(uint64_t sequence, int stream, int rank, int size, void* data,
                                                       const std::vector<byte_range>& slices, dtype t, reduce_op op,
                                                       std::size_t segment_bytes, wire_options opts);
/// Ring allgather (as make_ring_allgather), compressed and/or checked.
std::unique_ptr<chunk_op> make_wire_ring_allgather(uint64_t sequence, int stream, int rank, int size, void* out,
                                                   const std::vector<std::size_t>& counts, dtype t,
                                                   std::size_t segment_bytes, wire_options opts);

}  // namespace chorus
