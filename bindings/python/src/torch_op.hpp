// One Chorus operation on torch CPU tensors, as the Python module sees it: the tensors it must
// keep alive until the operation ended, the buffer handed to Chorus (the tensor itself when it
// is contiguous, else one staging copy) and the chorus::handle it waits on.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

#include "chorus/chorus.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::python {

/// Thrown for a bad argument caught here, before Chorus sees it (unsupported dtype or device).
struct argument_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
/// "allreduce('name')": how errors raised here name an operation.
std::string describe_call(collective_kind kind, const std::string& name);
/// The contiguous CPU buffer Chorus works on: `t` itself when it is contiguous (no copy), else
/// a contiguous copy (`staged` set). Throws argument_error for what Chorus cannot move.
at::Tensor checked_buffer(collective_kind kind, const std::string& name, const at::Tensor& t, bool& staged);
/// The tensor_view of a contiguous tensor checked by checked_buffer; a CUDA tensor's view names
/// its device and `stream` (a cudaStream_t: the caller's current stream, whose queued work
/// produces the tensor).
tensor_view view_of(const at::Tensor& buffer, void* stream = nullptr);
}  // namespace detail

/// A submitted operation. allreduce and broadcast complete in place on `target`; allgather
/// reads `target` and its result is a new tensor over the gathered rows. Never copied or
/// moved; destroying it waits until the operation ended (Chorus may still write the buffer).
class torch_op {
 public:
  /// `transient`: the name is used once (chorus::op_name; chorus.torch's unnamed ops).
  /// `wire`: the wire options (op_options; unset fields take the job's defaults).
  /// `process_set`: the process set the operation runs in (0: the job; chorus::op_name).
  /// `priority`: larger goes first (chorus::op_name).
  static std::unique_ptr<torch_op> allreduce(const std::string& name, at::Tensor target, reduce_op op,
                                             bool transient = false, void* stream = nullptr,
                                             const op_options& wire = {}, int process_set = 0,
                                             int32_t priority = 0);
  /// Several named allreduces in one call (chorus::allreduce_async over vectors): they reach
  /// the runtime together. Argument errors of one tensor throw before anything is submitted.
  /// `priorities`: one per tensor, or empty (all 0).
  static std::vector<std::unique_ptr<torch_op>> allreduce_all(const std::vector<std::string>& names,
                                                              const std::vector<at::Tensor>& targets, reduce_op op,
                                                              void* stream = nullptr, const op_options& wire = {},
                                                              int process_set = 0,
                                                              const std::vector<int32_t>& priorities = {});
  static std::unique_ptr<torch_op> broadcast(const std::string& name, at::Tensor target, int root,
                                             bool transient = false, void* stream = nullptr, int process_set = 0);
  static std::unique_ptr<torch_op> allgather(const std::string& name, at::Tensor input, bool transient = false,
                                             int process_set = 0);
  /// Defined in scatter_ops.cpp, built only when the C++ API has reducescatter and alltoall.
  static std::unique_ptr<torch_op> reducescatter(const std::string& name, at::Tensor input, reduce_op op,
                                                 bool transient = false, int process_set = 0);
  static std::unique_ptr<torch_op> alltoall(const std::string& name, at::Tensor input, std::vector<int64_t> splits,
                                            bool transient = false, int process_set = 0);
  torch_op(const torch_op&) = delete;
  torch_op& operator=(const torch_op&) = delete;
  ~torch_op();

  bool poll() const { return h_.poll(); }
  /// Waits up to `timeout` (negative: polls); true once the operation ended.
  bool wait_for(std::chrono::milliseconds timeout) const;
  /// Once ended: the status; copies a staged result back into `target` (once).
  const status& finish();
  /// Once ended successfully: `target` (allreduce, broadcast), the slice (reducescatter) or the
  /// rows received (allgather, alltoall: a tensor that shares the received bytes, no copy).
  at::Tensor output() const;
  /// Alltoall, once ended: how many rows came from each rank (scatter_ops.cpp).
  std::vector<int64_t> received_splits() const;
  /// Allgather, once ended: each rank's first dimension.
  std::vector<int64_t> first_dims() const { return h_.first_dims(); }
  /// Allreduce / reducescatter with the NaN/Inf check in skip mode, once ended: the ranks whose
  /// input held NaN/Inf (the same on every rank).
  std::vector<int> nonfinite_ranks() const { return h_.nonfinite_ranks(); }
  const std::string& name() const { return h_.name(); }

 private:
  torch_op(collective_kind kind, at::Tensor target);
  collective_kind kind_;
  at::Tensor target_;  // the caller's tensor
  at::Tensor buffer_;  // what Chorus reads and writes: target_, or its contiguous staging copy
  at::Tensor result_;  // reducescatter: the slice Chorus writes
  bool staged_ = false;
  bool finished_ = false;
  handle h_;
};

/// Chorus' dtype for a torch dtype, or nothing when Chorus does not move it.
std::optional<dtype> dtype_of(at::ScalarType t);

}  // namespace chorus::python
