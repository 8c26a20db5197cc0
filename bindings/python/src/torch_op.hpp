// One Chorus operation on torch CPU tensors, as the Python module sees it: the tensors it must
// keep alive until the operation ended, the buffer handed to Chorus (the tensor itself when it
// is contiguous, else one staging copy) and the chorus::handle it waits on.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

#include "bindings/cpp/chorus.hpp"

namespace chorus::python {

/// Thrown for a bad argument caught here, before Chorus sees it (unsupported dtype or device).
struct argument_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A submitted operation. allreduce and broadcast complete in place on `target`; allgather
/// reads `target` and its result is a new tensor over the gathered rows. Never copied or
/// moved; destroying it waits until the operation ended (Chorus may still write the buffer).
class torch_op {
 public:
  static std::unique_ptr<torch_op> allreduce(const std::string& name, at::Tensor target, reduce_op op);
  static std::unique_ptr<torch_op> broadcast(const std::string& name, at::Tensor target, int root);
  static std::unique_ptr<torch_op> allgather(const std::string& name, at::Tensor input);
  torch_op(const torch_op&) = delete;
  torch_op& operator=(const torch_op&) = delete;
  ~torch_op();

  bool poll() const { return h_.poll(); }
  /// Waits up to `timeout` (negative: polls); true once the operation ended.
  bool wait_for(std::chrono::milliseconds timeout) const;
  /// Once ended: the status; copies a staged result back into `target` (once).
  const status& finish();
  /// Once ended successfully: `target` (allreduce, broadcast) or the gathered rows (allgather,
  /// a tensor that shares the gathered bytes: no copy).
  at::Tensor output() const;
  /// Allgather, once ended: each rank's first dimension.
  std::vector<int64_t> first_dims() const { return h_.first_dims(); }
  const std::string& name() const { return h_.name(); }

 private:
  torch_op(collective_kind kind, at::Tensor target);
  collective_kind kind_;
  at::Tensor target_;  // the caller's tensor
  at::Tensor buffer_;  // what Chorus reads and writes: target_, or its contiguous staging copy
  bool staged_ = false;
  bool finished_ = false;
  handle h_;
};

/// Chorus' dtype for a torch dtype, or nothing when Chorus does not move it.
std::optional<dtype> dtype_of(at::ScalarType t);

}  // namespace chorus::python
