// Reduce-scatter and alltoall on torch CPU tensors (built when the C++ API has them): the
// input is only read (staged when not contiguous); reducescatter writes this rank's slice
// straight into a tensor allocated here, alltoall's rows are handed out without a copy.
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "module_support.hpp"

namespace chorus::python {

namespace {
// The buffer of an op that only reads its input: the input itself, or a contiguous copy that
// is never written back. Both ops split rows, so a scalar is refused.
at::Tensor read_only_rows(collective_kind kind, const std::string& name, const at::Tensor& input, const char* op) {
  bool staged = false;
  at::Tensor buffer = detail::checked_buffer(kind, name, input, staged);
  if (buffer.dim() == 0)
    throw argument_error(detail::describe_call(kind, name) + ": " + op +
                         " needs a tensor with at least one dimension, got a scalar");
  return buffer;
}
}  // namespace

std::unique_ptr<torch_op> torch_op::reducescatter(const std::string& name, at::Tensor input, reduce_op op,
                                                 bool transient, int process_set) {
  std::unique_ptr<torch_op> o(new torch_op(collective_kind::reducescatter, std::move(input)));
  o->buffer_ = read_only_rows(o->kind_, name, o->target_, "reducescatter");
  int n = chorus::size(), r = chorus::rank();
  if (n > 0 && process_set != 0) {  // the members' slices; outside the set: the error at submit
    auto sr = chorus::process_set_rank(process_set);
    auto sn = chorus::process_set_size(process_set);
    n = sr && sn ? *sn : 0;
    r = sr ? *sr : 0;
  }
  const op_name named(name, transient, process_set);
  if (n > 0) {
    std::vector<int64_t> shape(o->buffer_.sizes().begin(), o->buffer_.sizes().end());
    shape[0] = reducescatter_rows(shape[0], n, r);
    o->result_ = at::empty(shape, o->buffer_.options());
    o->h_ = reducescatter_async(named, detail::view_of(o->buffer_), detail::view_of(o->result_), op);
  } else {
    o->h_ = reducescatter_async(named, detail::view_of(o->buffer_), op);  // ends: not initialized, or not a member
  }
  return o;
}

std::unique_ptr<torch_op> torch_op::alltoall(const std::string& name, at::Tensor input, std::vector<int64_t> splits,
                                            bool transient, int process_set) {
  std::unique_ptr<torch_op> o(new torch_op(collective_kind::alltoall, std::move(input)));
  o->buffer_ = read_only_rows(o->kind_, name, o->target_, "alltoall");
  o->h_ = alltoall_async(op_name(name, transient, process_set), detail::view_of(o->buffer_), std::move(splits));
  return o;
}

std::vector<int64_t> torch_op::received_splits() const { return h_.received_splits(); }

void register_scatter_ops(pybind11::module_& m) {
  namespace py = pybind11;
  m.def(
      "reducescatter_async",
      [](at::Tensor t, const std::string& name, int op, bool transient, int process_set) {
        auto rop = to_reduce_op(op);
        return submit([&] { return torch_op::reducescatter(name, t, rop, transient, process_set); });
      },
      py::arg("tensor"), py::arg("name"), py::arg("op"), py::arg("transient") = false, py::arg("process_set") = 0,
      "Reduces `tensor` across all ranks; this rank gets its slice of the first dimension.");
  m.def(
      "alltoall_async",
      [](at::Tensor t, const std::string& name, std::vector<int64_t> splits, bool transient, int process_set) {
        return submit([&] { return torch_op::alltoall(name, t, std::move(splits), transient, process_set); });
      },
      py::arg("tensor"), py::arg("name"), py::arg("splits"), py::arg("transient") = false, py::arg("process_set") = 0,
      "Sends splits[i] rows of `tensor` to rank i; returns the rows received, in rank order.");
  m.def(
      "received_splits", [](const torch_op& op) { return op.received_splits(); }, py::arg("op"),
      "Alltoall, once ended: how many rows came from each rank.");
}

}  // namespace chorus::python
