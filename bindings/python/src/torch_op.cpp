// torch tensors → chorus::tensor_view and back (see torch_op.hpp).
#include <Python.h>  // first, as Python asks: the destructor releases the GIL while it waits

#include "torch_op.hpp"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

namespace chorus::python {
namespace detail {

std::string describe_call(collective_kind kind, const std::string& name) {
  return std::string(name_of(kind)) + "('" + name + "')";
}

/// The contiguous CPU buffer Chorus works on: the tensor itself when it is contiguous (no
/// copy), else a contiguous copy (the staging buffer).
at::Tensor checked_buffer(collective_kind kind, const std::string& name, const at::Tensor& t, bool& staged) {
  if (!t.defined()) throw argument_error(describe_call(kind, name) + ": the tensor is undefined");
  if (!dtype_of(t.scalar_type()))
    throw argument_error(describe_call(kind, name) + ": dtype " + std::string(c10::toString(t.scalar_type())) +
                         " is not supported; use one of float16, bfloat16, float32, float64, int32, int64, uint8, int8, "
                         "int16, bool");
  const bool on_device = kind == collective_kind::allreduce || kind == collective_kind::broadcast;
  if (!t.device().is_cpu() && !(t.is_cuda() && on_device))
    throw argument_error(describe_call(kind, name) + ": tensor on device " + t.device().str() +
                         "; Chorus moves CPU tensors and, for allreduce and broadcast, CUDA tensors (chorus.torch "
                         "stages the other collectives' CUDA tensors through host memory)");
  if (t.is_sparse() || t.layout() != at::kStrided)
    throw argument_error(describe_call(kind, name) +
                         ": sparse tensors are not supported here; use sparse_allreduce_async or a dense tensor");
  staged = !t.is_contiguous();
  return staged ? t.contiguous() : t;
}

tensor_view view_of(const at::Tensor& buffer, void* stream) {
  tensor_view v;
  v.data = buffer.numel() > 0 ? buffer.data_ptr() : nullptr;
  v.type = *dtype_of(buffer.scalar_type());
  v.shape.assign(buffer.sizes().begin(), buffer.sizes().end());
  v.device = buffer.is_cuda() ? device_kind::cuda : device_kind::cpu;
  if (buffer.is_cuda()) {
    v.device_index = buffer.get_device();
    v.stream = stream;
  }
  return v;
}

}  // namespace detail

using detail::checked_buffer;
using detail::describe_call;
using detail::view_of;

std::optional<dtype> dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return dtype::f16;
    case at::kBFloat16: return dtype::bf16;
    case at::kFloat: return dtype::f32;
    case at::kDouble: return dtype::f64;
    case at::kInt: return dtype::i32;
    case at::kLong: return dtype::i64;
    case at::kByte: return dtype::u8;
    case at::kChar: return dtype::i8;
    case at::kShort: return dtype::i16;
    case at::kBool: return dtype::boolean;
    default: return std::nullopt;
  }
}

torch_op::torch_op(collective_kind kind, at::Tensor target) : kind_(kind), target_(std::move(target)) {}

torch_op::~torch_op() {
  // Python may drop an op it never waited for; the buffer must outlive Chorus' use of it.
  // Chorus' threads never need the GIL, but other Python threads may: wait without it.
  if (h_.poll()) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* ts = PyEval_SaveThread();
    h_.wait();
    PyEval_RestoreThread(ts);
  } else {
    h_.wait();
  }
}

std::unique_ptr<torch_op> torch_op::allreduce(const std::string& name, at::Tensor target, reduce_op op, bool transient,
                                              void* stream, const op_options& wire, int process_set,
                                              int32_t priority) {
  std::unique_ptr<torch_op> o(new torch_op(collective_kind::allreduce, std::move(target)));
  o->buffer_ = checked_buffer(o->kind_, name, o->target_, o->staged_);
  o->h_ = allreduce_async(with_priority(op_name(name, transient, process_set), priority), view_of(o->buffer_, stream),
                          op, wire);
  return o;
}

std::vector<std::unique_ptr<torch_op>> torch_op::allreduce_all(const std::vector<std::string>& names,
                                                              const std::vector<at::Tensor>& targets, reduce_op op,
                                                              void* stream, const op_options& wire,
                                                              int process_set, const std::vector<int32_t>& priorities) {
  if (names.size() != targets.size())
    throw argument_error("allreduce_async_all: " + std::to_string(names.size()) + " names for " +
                         std::to_string(targets.size()) + " tensors");
  if (!priorities.empty() && priorities.size() != targets.size())
    throw argument_error("allreduce_async_all: " + std::to_string(priorities.size()) + " priorities for " +
                         std::to_string(targets.size()) + " tensors");
  std::vector<std::unique_ptr<torch_op>> ops;
  std::vector<op_name> op_names;
  std::vector<tensor_view> views;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    std::unique_ptr<torch_op> o(new torch_op(collective_kind::allreduce, targets[i]));
    o->buffer_ = checked_buffer(o->kind_, names[i], o->target_, o->staged_);
    op_names.push_back(with_priority(op_name(names[i], false, process_set), priorities.empty() ? 0 : priorities[i]));
    views.push_back(view_of(o->buffer_, stream));
    ops.push_back(std::move(o));
  }
  auto handles = allreduce_async(op_names, views, op, wire);
  for (std::size_t i = 0; i < ops.size(); ++i) ops[i]->h_ = std::move(handles[i]);
  return ops;
}

std::unique_ptr<torch_op> torch_op::broadcast(const std::string& name, at::Tensor target, int root, bool transient,
                                              void* stream, int process_set) {
  std::unique_ptr<torch_op> o(new torch_op(collective_kind::broadcast, std::move(target)));
  o->buffer_ = checked_buffer(o->kind_, name, o->target_, o->staged_);
  o->h_ = broadcast_async(op_name(name, transient, process_set), view_of(o->buffer_, stream), root);
  return o;
}

std::unique_ptr<torch_op> torch_op::allgather(const std::string& name, at::Tensor input, bool transient,
                                              int process_set) {
  std::unique_ptr<torch_op> o(new torch_op(collective_kind::allgather, std::move(input)));
  o->buffer_ = checked_buffer(o->kind_, name, o->target_, o->staged_);
  o->staged_ = false;  // the input is only read: nothing to copy back
  if (o->buffer_.dim() == 0)
    throw argument_error(describe_call(o->kind_, name) +
                         ": allgather needs a tensor with at least one dimension, got a scalar (use .view(1))");
  o->h_ = allgather_async(op_name(name, transient, process_set), view_of(o->buffer_));
  return o;
}

bool torch_op::wait_for(std::chrono::milliseconds timeout) const {
  return h_.wait(timeout).code() != errc::timeout || h_.poll();
}

const status& torch_op::finish() {
  const status& st = h_.result();
  if (!finished_ && h_.poll()) {
    finished_ = true;
    if (st.ok() && staged_) {
      c10::AutoGradMode no_grad(false);  // the target may be a leaf that requires grad
      target_.copy_(buffer_);
    }
  }
  return st;
}

at::Tensor torch_op::output() const {
  if (kind_ == collective_kind::reducescatter) return result_;
  if (kind_ != collective_kind::allgather && kind_ != collective_kind::alltoall) return target_;
  // The gathered bytes stay owned by the operation's state; the tensor keeps a copy of the
  // handle (and so that state) alive for as long as it lives.
  const auto& bytes = h_.gathered();
  std::vector<int64_t> shape = h_.shape();
  auto opts = at::TensorOptions().dtype(target_.scalar_type()).device(at::kCPU);
  if (bytes.empty()) return at::empty(shape, opts);
  auto* keep = new handle(h_);
  void* data = const_cast<std::byte*>(bytes.data());
  return at::from_blob(data, shape, [keep](void*) { delete keep; }, opts);
}

}  // namespace chorus::python
