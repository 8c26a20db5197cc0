// torch.distributed's reducing collectives on an ordered group (all_reduce, reduce, reduce_scatter),
// broadcast and barrier; the gathers are in calls_gather.cpp, all_to_all and send/recv in
// calls_exchange.cpp.
#include "c10d/calls.hpp"

#include "c10d/call_support.hpp"
#include "c10d/per_rank_list.hpp"
#include "runtime/collectives/reduce.hpp"

namespace chorus::python {

using namespace call_support;

c10d_calls::~c10d_calls() = default;

work_ptr c10d_calls::allreduce(std::vector<at::Tensor>& tensors, const ::c10d::AllreduceOptions& opts) {
  const std::string call = "all_reduce";
  check_alike(call, tensors);
  const at::Tensor& first = tensors[0];
  const dtype t = element_type(call, first.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, first);
  ordered::call_info info{call, describe(tensors),
                          ordered::spec_digest({1, code_of(first), static_cast<uint64_t>(op), tensors.size()},
                                               sizes_of(first))};
  auto work = make_work(rank(), OpType::ALLREDUCE, tensors);
  const std::size_t count = elements(first);
  if (tensors.size() == 1) {
    if (first.is_contiguous()) {
      group_->allreduce(info, first.data_ptr(), count, t, op, plain_ender(work));
      return work;
    }
    stand_in b(first);
    group_->allreduce(info, b.data(), count, t, op, ender(work, [b] { b.finish(); }));
    return work;
  }
  // Several tensors (the multi-device form): reduced here first, then across the group; every
  // tensor gets the result. An average divides by every contribution.
  at::Tensor acc = first.contiguous().clone();
  const reduce_op local = op == reduce_op::average ? reduce_op::sum : op;
  for (std::size_t i = 1; i < tensors.size(); ++i)
    reduce_into(acc.data_ptr(), tensors[i].contiguous().data_ptr(), count, t, local);
  const int divisor = op == reduce_op::average ? size() * static_cast<int>(tensors.size()) : 0;
  group_->allreduce(info, acc.data_ptr(), count, t, local, ender(work, [acc, tensors, count, t, divisor] {
                      if (divisor) divide_by(acc.data_ptr(), count, t, divisor);
                      for (const auto& x : tensors) x.copy_(acc);
                    }));
  return work;
}

work_ptr c10d_calls::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                         const ::c10d::AllreduceCoalescedOptions& opts) {
  const std::string call = "all_reduce_coalesced";
  if (tensors.empty()) refuse(call, "no tensors given");
  std::vector<int64_t> shapes;
  for (const auto& x : tensors) {
    check_tensor(call, x);
    if (x.scalar_type() != tensors[0].scalar_type())
      refuse(call, "tensors of one call must have one dtype: " + describe(tensors[0]) + " and " + describe(x));
    shapes.push_back(x.dim());
    for (auto d : x.sizes()) shapes.push_back(d);
  }
  const dtype t = element_type(call, tensors[0].scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, tensors[0]);
  std::size_t total = 0;
  for (const auto& x : tensors) total += bytes_of(x);
  at::Tensor flat = scratch_bytes(total);
  std::size_t at = 0;
  for (const auto& x : tensors) {
    copy_out(x, bytes_ptr(flat) + at);
    at += bytes_of(x);
  }
  ordered::call_info info{call, describe(tensors),
                          ordered::spec_digest({2, code_of(tensors[0]), static_cast<uint64_t>(op)}, shapes)};
  auto work = make_work(rank(), OpType::ALLREDUCE_COALESCED, tensors);
  group_->allreduce(info, flat.data_ptr(), total / size_of(t), t, op, ender(work, [flat, tensors] {
                      std::size_t at = 0;
                      for (const auto& x : tensors) {
                        copy_in(x, bytes_ptr(flat) + at);
                        at += bytes_of(x);
                      }
                    }));
  return work;
}

work_ptr c10d_calls::reduce(std::vector<at::Tensor>& tensors, const ::c10d::ReduceOptions& opts) {
  const std::string call = "reduce";
  check_one(call, tensors);
  check_root(call, opts.rootRank, size());
  const at::Tensor& x = tensors[0];
  const dtype t = element_type(call, x.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, x);
  // Every member ends with the result (the root's is the one torch specifies).
  ordered::call_info info{call, describe(x),
                          ordered::spec_digest({3, code_of(x), static_cast<uint64_t>(op),
                                                static_cast<uint64_t>(opts.rootRank)},
                                               sizes_of(x))};
  auto work = make_work(rank(), OpType::REDUCE, tensors);
  stand_in b(x);
  group_->allreduce(info, b.data(), elements(x), t, op, ender(work, [b] { b.finish(); }));
  return work;
}

work_ptr c10d_calls::broadcast(std::vector<at::Tensor>& tensors, const ::c10d::BroadcastOptions& opts) {
  const std::string call = "broadcast";
  check_alike(call, tensors);
  check_root(call, opts.rootRank, size());
  if (opts.rootTensor < 0 || opts.rootTensor >= static_cast<int64_t>(tensors.size()))
    refuse(call, "root tensor " + std::to_string(opts.rootTensor) + " of " + std::to_string(tensors.size()));
  const at::Tensor& x = tensors[static_cast<std::size_t>(opts.rootTensor)];
  const dtype t = element_type(call, x.scalar_type());
  ordered::call_info info{call, describe(tensors),
                          ordered::spec_digest({4, code_of(x), static_cast<uint64_t>(opts.rootRank)}, sizes_of(x))};
  auto work = make_work(rank(), OpType::BROADCAST, tensors);
  stand_in b(x);
  group_->broadcast(info, b.data(), elements(x), t, static_cast<int>(opts.rootRank), ender(work, [b, tensors] {
                      b.finish();
                      for (const auto& y : tensors)
                        if (!y.is_same(b.user)) y.copy_(b.flat);
                    }));
  return work;
}

work_ptr c10d_calls::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                    const ::c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter";
  check_one(call, outputs);
  const at::Tensor& y = outputs[0];
  const auto N = static_cast<std::size_t>(size());
  check_per_rank_list(call, inputs, size(), y, "input", "output", false);
  const dtype t = element_type(call, y.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, y);
  const std::size_t n = bytes_of(y);
  at::Tensor buf = scratch_bytes(n * N);
  for (std::size_t r = 0; r < N; ++r) copy_out(inputs[0][r], bytes_ptr(buf) + r * n);
  ordered::call_info info{call, describe(y),
                          ordered::spec_digest({9, code_of(y), static_cast<uint64_t>(op)}, sizes_of(y))};
  auto work = make_work(rank(), OpType::REDUCE_SCATTER, outputs);
  group_->reducescatter(info, buf.data_ptr(), std::vector<std::size_t>(N, elements(y)), t, op,
                        ender(work, [buf, y, n, me = static_cast<std::size_t>(rank())] {
                          copy_in(y, bytes_ptr(buf) + me * n);
                        }));
  return work;
}

work_ptr c10d_calls::reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                         const ::c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter_tensor";
  check_tensor(call, input);
  check_tensor(call, output);
  const auto N = static_cast<std::size_t>(size());
  if (output.scalar_type() != input.scalar_type() || input.numel() != output.numel() * size())
    refuse(call, "input " + describe(input) + " must hold " + std::to_string(size()) + " times the output " +
                     describe(output));
  const dtype t = element_type(call, output.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, output);
  const std::size_t n = bytes_of(output);
  at::Tensor buf = scratch_bytes(n * N);
  copy_out(input, bytes_ptr(buf));
  ordered::call_info info{call, describe(output),
                          ordered::spec_digest({9, code_of(output), static_cast<uint64_t>(op), static_cast<uint64_t>(output.numel())})};
  auto work = make_work(rank(), OpType::_REDUCE_SCATTER_BASE, {output});
  group_->reducescatter(info, buf.data_ptr(), std::vector<std::size_t>(N, elements(output)), t, op,
                        ender(work, [buf, output, n, me = static_cast<std::size_t>(rank())] {
                          copy_in(output, bytes_ptr(buf) + me * n);
                        }));
  return work;
}

work_ptr c10d_calls::barrier() {
  ordered::call_info info{"barrier", "", ordered::spec_digest({12})};
  auto work = make_work(rank(), OpType::BARRIER, {});
  group_->barrier(info, [work](const status& st) { work->complete(st); });
  return work;
}

}  // namespace chorus::python
