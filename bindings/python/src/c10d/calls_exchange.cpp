// torch.distributed's rank-to-rank exchanges on an ordered group: all_to_all (single and list
// forms), send and recv.
#include "c10d/calls.hpp"

#include "c10d/call_support.hpp"

namespace chorus::python {

using namespace call_support;

work_ptr c10d_calls::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                   std::vector<int64_t>& input_splits) {
  const std::string call = "all_to_all_single";
  check_tensor(call, input);
  check_tensor(call, output);
  if (output.scalar_type() != input.scalar_type())
    refuse(call, "output " + describe(output) + " and input " + describe(input) + " differ in dtype");
  const auto N = static_cast<std::size_t>(size());
  // Rows of dim 0, each of `row` bytes; equal splits when none are given.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() ? t.size(0) : 1;
    const std::size_t row = rows ? bytes_of(t) / static_cast<std::size_t>(rows) : 0;
    std::vector<std::size_t> out(N, 0);
    if (splits.empty()) {
      if (rows % size() != 0)
        refuse(call, std::string(which) + " " + describe(t) + ": dim 0 does not split evenly over " +
                         std::to_string(size()) + " ranks; give split sizes");
      for (auto& c : out) c = static_cast<std::size_t>(rows / size()) * row;
      return out;
    }
    if (splits.size() != N) refuse(call, std::string(which) + " split sizes need " + std::to_string(N) + " entries");
    int64_t sum = 0;
    for (std::size_t i = 0; i < N; ++i) {
      if (splits[i] < 0) refuse(call, std::string(which) + " split sizes must not be negative");
      sum += splits[i];
      out[i] = static_cast<std::size_t>(splits[i]) * row;
    }
    if (sum != rows)
      refuse(call, std::string(which) + " split sizes sum to " + std::to_string(sum) + ", but dim 0 of " +
                       describe(t) + " is " + std::to_string(rows));
    return out;
  };
  auto send = counts(input, input_splits, "input");
  auto recv = counts(output, output_splits, "output");
  std::vector<int64_t> row_shape = input.sizes().vec();
  if (!row_shape.empty()) row_shape.erase(row_shape.begin());
  ordered::call_info info{call, describe(input), ordered::spec_digest({10, code_of(input)}, row_shape)};
  auto work = make_work(rank(), OpType::ALLTOALL_BASE, {output});
  at::Tensor in = input.contiguous();
  stand_in out(output);
  group_->alltoall(info, in.data_ptr(), send, out.data(), recv, dtype::u8, ender(work, [in, out] { out.finish(); }));
  return work;
}

work_ptr c10d_calls::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
  const std::string call = "all_to_all";
  const auto N = static_cast<std::size_t>(size());
  if (inputs.size() != N || outputs.size() != N)
    refuse(call, "needs " + std::to_string(N) + " input and output tensors (one per rank), got " +
                     std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  std::vector<std::size_t> send(N), recv(N);
  std::size_t in_total = 0, out_total = 0;
  for (std::size_t i = 0; i < N; ++i) {
    check_tensor(call, inputs[i]);
    check_tensor(call, outputs[i]);
    if (inputs[i].scalar_type() != inputs[0].scalar_type() || outputs[i].scalar_type() != inputs[0].scalar_type())
      refuse(call, "every tensor of one call needs one dtype: " + describe(inputs[0]) + ", " + describe(inputs[i]) +
                       ", " + describe(outputs[i]));
    send[i] = bytes_of(inputs[i]);
    recv[i] = bytes_of(outputs[i]);
    in_total += send[i];
    out_total += recv[i];
  }
  if (send[static_cast<std::size_t>(rank())] != recv[static_cast<std::size_t>(rank())])
    refuse(call, "the input for this rank itself (" + describe(inputs[static_cast<std::size_t>(rank())]) +
                     ") and its output (" + describe(outputs[static_cast<std::size_t>(rank())]) + ") differ in size");
  at::Tensor in = scratch_bytes(in_total), out = scratch_bytes(out_total);
  std::size_t at = 0;
  for (std::size_t i = 0; i < N; ++i) {
    copy_out(inputs[i], bytes_ptr(in) + at);
    at += send[i];
  }
  ordered::call_info info{call, describe(inputs), ordered::spec_digest({11, code_of(inputs[0])})};
  auto work = make_work(rank(), OpType::ALLTOALL, outputs);
  group_->alltoall(info, in.data_ptr(), send, out.data_ptr(), recv, dtype::u8,
                   ender(work, [in, out, outputs] {
                     std::size_t at = 0;
                     for (const auto& y : outputs) {
                       copy_in(y, bytes_ptr(out) + at);
                       at += bytes_of(y);
                     }
                   }));
  return work;
}

work_ptr c10d_calls::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const std::string call = "send";
  check_one(call, tensors);
  const at::Tensor& x = tensors[0];
  ordered::call_info info{call, describe(x) + " to rank " + std::to_string(dst) + " tag " + std::to_string(tag), 0};
  auto work = make_work(rank(), OpType::SEND, tensors);
  at::Tensor in = x.contiguous();
  group_->send(info, in.data_ptr(), bytes_of(in), dst, tag, ender(work, [in] {}));
  return work;
}

work_ptr c10d_calls::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const std::string call = "recv";
  check_one(call, tensors);
  const at::Tensor& y = tensors[0];
  ordered::call_info info{call, describe(y) + (src < 0 ? std::string(" from any rank") : " from rank " + std::to_string(src)) +
                                    " tag " + std::to_string(tag),
                          0};
  auto work = make_work(rank(), src < 0 ? OpType::RECVANYSOURCE : OpType::RECV, tensors);
  stand_in out(y);
  group_->recv(info, out.data(), bytes_of(y), src, tag, [work, out](const status& st, int source) {
    status result = st;
    if (st.ok()) {
      try {
        out.finish();
      } catch (const std::exception& e) {
        result = status{errc::internal, std::string("copying the result back failed: ") + e.what()};
      }
    }
    work->complete(result, source);
  });
  return work;
}

}  // namespace chorus::python
