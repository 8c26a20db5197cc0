// torch.distributed's collectives over an ordered group (bindings/ordered/ordered_group.hpp),
// with Gloo's semantics on CPU tensors, and the functions torch's Python layer builds on. Torch's
// tensors in, chorus_work out; nothing here depends on which torch base class calls it, so the
// 1.13 ProcessGroup (process_group.hpp) and a later torch's c10d::Backend forward to the same
// calls.
// Each call checks its arguments on the calling thread (a bad one raises RuntimeError naming the
// call, before anything is issued), makes contiguous copies where a tensor is not (copied back
// when the call ends), and hands the group raw buffers. Every tensor a call touches stays
// referenced by its end function until the call ended.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <string>
#include <vector>

#include "bindings/ordered/ordered_group.hpp"

namespace chorus::python {

class c10d_calls {
 public:
  explicit c10d_calls(std::unique_ptr<ordered::ordered_group> group) : group_(std::move(group)) {}
  ~c10d_calls();

  using work_ptr = c10::intrusive_ptr<::c10d::Work>;
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  ordered::ordered_group& group() { return *group_; }

  work_ptr allreduce(std::vector<at::Tensor>& tensors, const ::c10d::AllreduceOptions& opts);
  work_ptr allreduce_coalesced(std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts);
  work_ptr reduce(std::vector<at::Tensor>& tensors, const ::c10d::ReduceOptions& opts);
  work_ptr broadcast(std::vector<at::Tensor>& tensors, const ::c10d::BroadcastOptions& opts);
  work_ptr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs);
  work_ptr allgather_base(at::Tensor& output, at::Tensor& input);
  work_ptr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs);
  work_ptr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                  const ::c10d::GatherOptions& opts);
  work_ptr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                   const ::c10d::ScatterOptions& opts);
  work_ptr reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                          const ::c10d::ReduceScatterOptions& opts);
  work_ptr reduce_scatter_base(at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts);
  work_ptr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                         std::vector<int64_t>& input_splits);
  work_ptr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs);
  work_ptr barrier();
  work_ptr send(std::vector<at::Tensor>& tensors, int dst, int tag);
  work_ptr recv(std::vector<at::Tensor>& tensors, int src, int tag);

 private:
  std::unique_ptr<ordered::ordered_group> group_;
};

}  // namespace chorus::python
