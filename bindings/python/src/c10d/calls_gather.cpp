// torch.distributed's gathering collectives on an ordered group: all_gather (list, tensor and
// coalesced forms), gather and scatter.
#include "c10d/calls.hpp"

#include "c10d/call_support.hpp"
#include "c10d/per_rank_list.hpp"

namespace chorus::python {

using namespace call_support;

work_ptr c10d_calls::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs) {
  const std::string call = "all_gather";
  check_one(call, inputs);
  const at::Tensor& x = inputs[0];
  check_per_rank_list(call, outputs, size(), x, "output", "input", false);
  const std::size_t n = bytes_of(x);
  ordered::call_info info{call, describe(x), ordered::spec_digest({5, code_of(x)}, sizes_of(x))};
  auto work = make_work(rank(), OpType::ALLGATHER, outputs[0]);
  at::Tensor in = x.contiguous();
  at::Tensor out = scratch_bytes(n * static_cast<std::size_t>(size()));
  group_->allgather(info, in.data_ptr(), out.data_ptr(), std::vector<std::size_t>(static_cast<std::size_t>(size()), n),
                    dtype::u8, ender(work, [in, out, list = outputs[0], n] { copy_rows_in(list, out, n); }));
  return work;
}

work_ptr c10d_calls::allgather_base(at::Tensor& output, at::Tensor& input) {
  const std::string call = "all_gather_into_tensor";
  check_tensor(call, input);
  check_tensor(call, output);
  if (output.scalar_type() != input.scalar_type() || output.numel() != input.numel() * size())
    refuse(call, "output " + describe(output) + " must hold " + std::to_string(size()) + " times the input " +
                     describe(input));
  const std::size_t n = bytes_of(input);
  ordered::call_info info{call, describe(input), ordered::spec_digest({5, code_of(input)}, sizes_of(input))};
  auto work = make_work(rank(), OpType::_ALLGATHER_BASE, {output});
  at::Tensor in = input.contiguous();
  stand_in out(output);
  group_->allgather(info, in.data_ptr(), out.data(), std::vector<std::size_t>(static_cast<std::size_t>(size()), n),
                    dtype::u8, ender(work, [in, out] { out.finish(); }));
  return work;
}

work_ptr c10d_calls::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                         std::vector<at::Tensor>& inputs) {
  const std::string call = "all_gather_coalesced";
  if (inputs.empty()) refuse(call, "no tensors given");
  if (outputs.size() != static_cast<std::size_t>(size()))
    refuse(call, "needs one output list per rank (" + std::to_string(size()) + "), got " +
                     std::to_string(outputs.size()));
  std::vector<int64_t> shapes;
  std::size_t total = 0;
  for (const auto& x : inputs) {
    check_tensor(call, x);
    shapes.push_back(static_cast<int64_t>(x.scalar_type()));
    shapes.push_back(x.dim());
    for (auto d : x.sizes()) shapes.push_back(d);
    total += bytes_of(x);
  }
  for (const auto& list : outputs) {
    if (list.size() != inputs.size())
      refuse(call, "each rank's output list needs " + std::to_string(inputs.size()) + " tensors, like the input");
    for (std::size_t j = 0; j < list.size(); ++j)
      if (list[j].scalar_type() != inputs[j].scalar_type() || list[j].numel() != inputs[j].numel())
        refuse(call, "output " + describe(list[j]) + " does not match the input " + describe(inputs[j]));
  }
  at::Tensor in = scratch_bytes(total);
  std::size_t at = 0;
  for (const auto& x : inputs) {
    copy_out(x, bytes_ptr(in) + at);
    at += bytes_of(x);
  }
  at::Tensor out = scratch_bytes(total * static_cast<std::size_t>(size()));
  ordered::call_info info{call, describe(inputs), ordered::spec_digest({6}, shapes)};
  std::vector<at::Tensor> flat_outputs;
  for (const auto& list : outputs) flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
  auto work = make_work(rank(), OpType::ALLGATHER_COALESCED, flat_outputs);
  group_->allgather(info, in.data_ptr(), out.data_ptr(),
                    std::vector<std::size_t>(static_cast<std::size_t>(size()), total), dtype::u8,
                    ender(work, [in, out, outputs, total] {
                      for (std::size_t r = 0; r < outputs.size(); ++r) {
                        std::size_t at = r * total;
                        for (const auto& y : outputs[r]) {
                          copy_in(y, bytes_ptr(out) + at);
                          at += bytes_of(y);
                        }
                      }
                    }));
  return work;
}

work_ptr c10d_calls::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                            const ::c10d::GatherOptions& opts) {
  const std::string call = "gather";
  check_one(call, inputs);
  const at::Tensor& x = inputs[0];
  const auto [root, am_root] = check_root_list(call, opts.rootRank, rank(), size(), outputs, x, "output", "input");
  const std::size_t n = bytes_of(x);
  const auto N = static_cast<std::size_t>(size());
  std::vector<std::size_t> send(N, 0), recv(N, 0);
  send[static_cast<std::size_t>(root)] = n;
  if (am_root) recv.assign(N, n);
  ordered::call_info info{call, describe(x),
                          ordered::spec_digest({7, code_of(x), static_cast<uint64_t>(root)}, sizes_of(x))};
  auto work = make_work(rank(), OpType::GATHER, am_root ? outputs[0] : std::vector<at::Tensor>{});
  at::Tensor in = x.contiguous();
  at::Tensor out = scratch_bytes(am_root ? n * N : 0);
  std::vector<at::Tensor> list = am_root ? outputs[0] : std::vector<at::Tensor>{};
  group_->alltoall(info, in.data_ptr(), send, out.data_ptr(), recv, dtype::u8,
                   ender(work, [in, out, list, n] { copy_rows_in(list, out, n); }));
  return work;
}

work_ptr c10d_calls::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                             const ::c10d::ScatterOptions& opts) {
  const std::string call = "scatter";
  check_one(call, outputs);
  const at::Tensor& y = outputs[0];
  const auto [root, am_root] = check_root_list(call, opts.rootRank, rank(), size(), inputs, y, "input", "output");
  const auto N = static_cast<std::size_t>(size());
  const std::size_t n = bytes_of(y);
  std::vector<std::size_t> send(N, 0), recv(N, 0);
  recv[static_cast<std::size_t>(root)] = n;
  at::Tensor in = scratch_bytes(am_root ? n * N : 0);
  if (am_root) {
    send.assign(N, n);
    for (std::size_t r = 0; r < N; ++r) copy_out(inputs[0][r], bytes_ptr(in) + r * n);
  }
  ordered::call_info info{call, describe(y),
                          ordered::spec_digest({8, code_of(y), static_cast<uint64_t>(root)}, sizes_of(y))};
  auto work = make_work(rank(), OpType::SCATTER, outputs);
  stand_in out(y);
  group_->alltoall(info, in.data_ptr(), send, out.data(), recv, dtype::u8, ender(work, [in, out] { out.finish(); }));
  return work;
}

}  // namespace chorus::python
