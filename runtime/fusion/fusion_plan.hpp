// The fusion plan as pure functions: an agreed batch becomes buckets (plan_buckets), and
// buckets become chunks with global sequence numbers (plan_chunks). Every rank computes the
// identical plan from the identical agreed batch, so ranks never exchange the plan.
// Contract: both functions depend only on their arguments (no clock, no randomness, no
// per-rank state), and their output order is part of the contract documented below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/dtype.hpp"

namespace chorus {

/// Which collective a tensor of the agreed batch asks for. Only allreduce is fused.
enum class fusable_kind : uint8_t { allreduce = 0, broadcast = 1, allgather = 2, reducescatter = 3, alltoall = 4 };

/// "allreduce", "broadcast", "allgather", "reducescatter", "alltoall".
const char* to_string(fusable_kind kind);

/// Byte alignment of every member's offset inside a fused buffer. A multiple of every
/// element size, so chunk cuts stay element-aligned and kernels see aligned starts.
/// The gaps it leaves between members are zeroed by pack() and skipped by unpack().
inline constexpr std::size_t fusion_alignment = 64;

/// One tensor of an agreed batch, as the fusion planner needs it.
struct fusion_item {
  uint32_t id = 0;                           ///< agreed tensor id; unique within a batch
  fusable_kind kind = fusable_kind::allreduce;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;             ///< meaningful for allreduce only
  int root = 0;                              ///< meaningful for broadcast only
  int device = -1;                           ///< device index; -1 for host memory
  int process_set = 0;                       ///< process set id; 0 is the global set
  std::size_t bytes = 0;                     ///< payload bytes, identical on every rank*
  /// Wire options (compression, NaN/Inf check, prescale) as one number: tensors fuse only with equals.
  int64_t wire_mode = 0;
  // * for allgather and alltoall: this rank's contribution, which may differ between ranks;
  //   it never influences the plan's shape (such a tensor is always one bucket and one chunk).
};

/// Where one tensor lies inside its bucket's (fused) buffer.
struct bucket_member {
  uint32_t id = 0;
  std::size_t offset = 0;  ///< multiple of fusion_alignment; 0 for in-place buckets
  std::size_t bytes = 0;
  friend bool operator==(const bucket_member&, const bucket_member&) = default;
};

/// Tensors reduced together by one collective over one buffer.
struct bucket {
  fusable_kind kind = fusable_kind::allreduce;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  int device = -1;
  int process_set = 0;
  int64_t wire_mode = 0;
  std::vector<bucket_member> members;  ///< in batch order
  std::size_t bytes = 0;               ///< end of the last member (padding included)
  /// Exactly one member: the collective runs on the caller's buffer, no pack or unpack.
  bool in_place = false;
  friend bool operator==(const bucket&, const bucket&) = default;
};

/// Packs an agreed batch into buckets.
///
/// 1. The batch is walked in order. Each allreduce tensor joins the open bucket of its key
///    (dtype, op, device, process set, wire mode) at the next fusion_alignment boundary if the bucket
///    then still holds at most `fusion_threshold` bytes; otherwise that bucket is closed and
///    the tensor opens a new one. Tensors of other keys in between do not close a bucket,
///    so interleaved dtypes still fuse.
/// 2. A tensor larger than the threshold is a bucket of its own.
/// 3. Broadcast, allgather, reducescatter and alltoall tensors are buckets of their own.
/// 4. Every bucket with exactly one member is in_place (offset 0, no copy).
/// 5. `fusion_threshold == 0` disables fusion: one in-place bucket per tensor.
///
/// Order contract: buckets are ordered by the batch position of their first member, and
/// members inside a bucket keep batch order. Every tensor appears in exactly one bucket.
/// Preconditions: ids are unique within the batch; every size is a whole number of elements
/// (checked in release builds too: a violation logs the tensor and aborts).
std::vector<bucket> plan_buckets(const std::vector<fusion_item>& batch, std::size_t fusion_threshold);

/// A contiguous, element-aligned piece of one bucket, moved and reduced as one unit.
struct chunk {
  uint64_t sequence = 0;  ///< global sequence number, identical on every rank
  uint32_t bucket = 0;    ///< index into the bucket list it was planned from
  std::size_t offset = 0; ///< byte offset inside the bucket's buffer
  std::size_t bytes = 0;
  friend bool operator==(const chunk&, const chunk&) = default;
};

/// A piece of a buffer, in bytes: what cut_chunks gives.
struct chunk_cut {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// The one cut of a buffer into chunks, shared by the pipeline's buckets (plan_chunks below)
/// and the communicator's own collectives: `total` bytes in pieces of `chunk_bytes` rounded
/// down to whole `element`s (at least one), in order, covering [0, total) exactly once; one
/// piece for `chunk_bytes` 0 (no cut), and one empty piece for `total` 0.
std::vector<chunk_cut> cut_chunks(std::size_t total, std::size_t chunk_bytes, std::size_t element);

/// Cuts every bucket, in bucket order, into chunks of at most `chunk_bytes` bytes (cut_chunks).
///
/// 1. The cut size is `chunk_bytes` rounded down to whole elements of the bucket's dtype,
///    and at least one element; `chunk_bytes == 0` means "do not cut" (one chunk per bucket).
/// 2. Chunks of one bucket are contiguous and ascending by offset; all but the last have
///    the cut size, and together they cover [0, bucket.bytes) exactly once.
/// 3. A zero-byte bucket gets one zero-length chunk, so its completion still fires.
/// 4. Allgather and alltoall buckets are never cut: their size may differ between ranks. A
///    reducescatter bucket is one chunk here too: it is cut along every rank's slice instead
///    (runtime/collectives/scatter_plan.hpp), which only its planner knows how to do.
/// 5. Sequence numbers are consecutive from `first_sequence`, in output order.
std::vector<chunk> plan_chunks(const std::vector<bucket>& buckets, std::size_t chunk_bytes,
                               uint64_t first_sequence);

}  // namespace chorus
