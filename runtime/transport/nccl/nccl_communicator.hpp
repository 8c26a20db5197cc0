// The NCCL data plane: one NCCL communicator per rank and the CUDA stream its collectives run on.
// Compiled only with CHORUS_WITH_NCCL; every CUDA/NCCL failure comes back as a chorus::status
// naming the call, the library's error string and the rank. Builds and links without a GPU.
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

/// NCCL's data type for a chorus dtype. Every chorus dtype has one (f16 → ncclFloat16,
/// bf16 → ncclBfloat16, f32, f64, i32, i64, u8 → ncclUint8); a value outside the enum gives
/// invalid_argument.
result<ncclDataType_t> to_nccl(dtype t);

/// NCCL's reduction for a chorus op: sum → ncclSum, average → ncclAvg, min → ncclMin,
/// max → ncclMax, product → ncclProd; a value outside the enum gives invalid_argument.
result<ncclRedOp_t> to_nccl(reduce_op op);

/// One rank's NCCL communicator on one CUDA device, with its own non-blocking CUDA stream.
///
/// Contract: collectives are enqueued asynchronously on stream() and must be issued in the same
/// order, with the same count, dtype, op and root, on every rank (NCCL matches them by order).
/// Buffers are device memory and must stay valid until synchronize() returned.
/// Thread-safety: none; one thread at a time calls into one communicator. Each call makes the
/// communicator's device current on the calling thread.
/// Failure: an asynchronous NCCL error (a peer died, a network failure) is found by
/// synchronize(); the communicator is then aborted and every later call returns a status that
/// repeats the first failure.
class nccl_communicator {
 public:
  /// Number of CUDA devices this process can use; 0 when CUDA reports no device or no driver
  /// (never fails; an unexpected CUDA error is logged at warn level and also gives 0).
  static int visible_devices();

  /// A fresh ncclUniqueId (ncclGetUniqueId) as bytes. Rank 0 makes it and sends it to all ranks
  /// before they call create().
  static result<std::array<char, 128>> make_unique_id();

  /// Joins the communicator of `size` ranks named by `unique_id_bytes` as `rank`, on CUDA device
  /// `device`. Blocks until all ranks joined (ncclCommInitRank). Errors: invalid_argument for a
  /// rank outside [0, size) or a negative device; config when CUDA sees no device or fewer
  /// than device+1; rendezvous when ranks cannot reach each other; internal for other CUDA/NCCL
  /// failures.
  static result<std::unique_ptr<nccl_communicator>> create(
      int rank, int size, const std::array<char, 128>& unique_id_bytes, int device);

  /// Waits for enqueued work (like synchronize()), then frees the communicator (ncclCommDestroy,
  /// or ncclCommAbort after an asynchronous error) and the stream. Failures are logged.
  ~nccl_communicator();
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;

  /// In-place allreduce of `count` elements of `device_buf` (average → ncclAvg). Enqueues only.
  status allreduce(void* device_buf, std::size_t count, dtype t, reduce_op op);

  /// In-place broadcast of `count` elements of `buf` from rank `root` to all. Enqueues only.
  status broadcast(void* buf, std::size_t count, dtype t, int root);

  /// Gathers `count` elements of `send` from each rank into `recv`, which holds size()*count
  /// elements in rank order. Enqueues only.
  status allgather(const void* send, void* recv, std::size_t count, dtype t);

  /// Waits until everything enqueued on stream() finished. Polls the stream and
  /// ncclCommGetAsyncError, so a peer failure ends the wait with an error naming the rank
  /// instead of hanging; on such an error the communicator is aborted.
  status synchronize();

  /// Asks NCCL whether a peer or the network failed (ncclCommGetAsyncError) without waiting;
  /// on such an error the communicator is aborted and the error returned (then, and after
  /// abort(), every call returns it).
  status check_async();

  /// Aborts the communicator (ncclCommAbort) because of `cause`, e.g. a collective that outlived
  /// the peer timeout: kernels waiting for a peer return, and later calls fail with `cause`.
  void abort(const status& cause) { abort_after(cause); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  /// The stream the collectives run on, for callers that order their own copies after them.
  cudaStream_t stream() const { return stream_; }

 private:
  nccl_communicator(int rank, int size, int device) : rank_(rank), size_(size), device_(device) {}

  // Checks before enqueuing: not broken, device current. `what` names the caller.
  status ready(const char* what);
  // Turns a failed NCCL call into a status; aborts the communicator when the failure is not
  // a plain bad argument, because NCCL leaves it in an undefined state.
  status nccl_failed(const char* call, ncclResult_t r);
  void abort_after(const status& cause);

  int rank_;
  int size_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  status broken_;  // the first failure that aborted the communicator; ok while usable
};

}  // namespace chorus
