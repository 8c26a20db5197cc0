// The shared state of one submitted operation: every copy of its handle, the pipeline's done
// callback and (for the C API) its handle table entry point at one op_state. complete() is
// the only way it ends, and only its first call counts, so an operation ends exactly once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::detail {

struct op_state {
  /// Runs once, after the state is final, on the thread that completed the operation.
  using callback = std::function<void(const op_state&)>;

  /// `label` names the operation in messages; empty: describe(spec), e.g. "allreduce('w')".
  op_state(tensor_spec s, callback on_done, std::string label = {});

  /// Ends the operation: records the outcome, wakes waiters, then runs the callback (an
  /// exception it throws is logged and dropped: it must not unwind into a Chorus thread).
  /// Returns false, and does nothing, when the operation had already ended.
  bool complete(status st, std::vector<std::byte> gathered = {}, std::vector<int64_t> first_dims = {});

  /// True once complete() ran. The fields below are final (and readable) from then on.
  bool done() const { return done_.load(std::memory_order_acquire); }
  /// Waits until done() or `timeout` passed; `timeout` >= ~100 years waits without a deadline.
  bool wait_for(std::chrono::milliseconds timeout);

  const tensor_spec spec;       ///< what was submitted (name, kind, dtype, shape, ...)
  /// CUDA tensors (spec.device cuda): tensor_view's device_index and stream, set before submit.
  int device_index = 0;
  void* cuda_stream = nullptr;
  const std::string label;      ///< how messages name the operation
  const status pending_status;  ///< what result() says before the end
  status result;
  /// allgather: the rows of every rank, in rank order; alltoall: the rows received;
  /// reducescatter: this rank's slice, when the op owns it (sized before submission, written
  /// by the pipeline; cleared if the op fails).
  std::vector<std::byte> gathered;
  std::vector<int64_t> first_dims;  ///< allgather: each rank's first dimension; alltoall: rows received per rank
  /// allgather, alltoall: the shape of `gathered`; reducescatter: the slice's shape, set
  /// before submission (cleared if the op fails).
  std::vector<int64_t> shape;
  int last_rank = -1;  ///< join: the last rank to join (set before complete())
  /// The caller chose spec.wire / spec.check for this op (op_options); otherwise the session
  /// applies the job's defaults where they can apply (set before submit).
  bool wire_set = false;
  bool check_set = false;

 private:
  callback on_done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
};

/// True while this thread runs a completion callback (init/shutdown refuse to run there).
bool in_callback();

/// A wait that may block, asked for inside a completion callback: errc::invalid_argument
/// naming `fn` and the operation, since the callback runs on the runtime's worker that would
/// complete what it waits for (a deadlock). Refused whether or not the operation already
/// ended, so that a program does not work or hang by timing. Ok outside callbacks, and for a
/// wait that cannot block (`may_block` false: a poll).
status check_wait_allowed(const op_state& s, bool may_block, const char* fn);

}  // namespace chorus::detail
