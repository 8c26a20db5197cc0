// The torch.distributed backend "chorus" for torch 1.13: a c10d::ProcessGroup whose every
// collective forwards to c10d_calls (calls.hpp). Kept this thin so that torch 2.x's
// c10d::Backend can forward to the same calls beside it.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "c10d/calls.hpp"

namespace chorus::python {

class process_group_chorus final : public ::c10d::ProcessGroup {
 public:
  /// Joins the group in `store` (torch's PrefixStore for it) and builds its data plane. Blocks
  /// until every member arrived; a failure raises RuntimeError naming the store and the ranks.
  process_group_chorus(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string name, std::vector<int> global_ranks);
  ~process_group_chorus() override;

  const std::string getBackendName() const override { return "chorus"; }

  using work_ptr = c10::intrusive_ptr<::c10d::Work>;
  work_ptr broadcast(std::vector<at::Tensor>& t, const ::c10d::BroadcastOptions& o) override {
    return calls_->broadcast(t, o);
  }
  work_ptr allreduce(std::vector<at::Tensor>& t, const ::c10d::AllreduceOptions& o) override {
    return calls_->allreduce(t, o);
  }
  work_ptr allreduce_coalesced(std::vector<at::Tensor>& t, const ::c10d::AllreduceCoalescedOptions& o) override {
    return calls_->allreduce_coalesced(t, o);
  }
  work_ptr reduce(std::vector<at::Tensor>& t, const ::c10d::ReduceOptions& o) override { return calls_->reduce(t, o); }
  work_ptr allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                     const ::c10d::AllgatherOptions&) override {
    return calls_->allgather(out, in);
  }
  work_ptr _allgather_base(at::Tensor& out, at::Tensor& in, const ::c10d::AllgatherOptions&) override {
    return calls_->allgather_base(out, in);
  }
  work_ptr allgather_coalesced(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                               const ::c10d::AllgatherOptions&) override {
    return calls_->allgather_coalesced(out, in);
  }
  work_ptr gather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                  const ::c10d::GatherOptions& o) override {
    return calls_->gather(out, in, o);
  }
  work_ptr scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                   const ::c10d::ScatterOptions& o) override {
    return calls_->scatter(out, in, o);
  }
  work_ptr reduce_scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                          const ::c10d::ReduceScatterOptions& o) override {
    return calls_->reduce_scatter(out, in, o);
  }
  work_ptr _reduce_scatter_base(at::Tensor& out, at::Tensor& in, const ::c10d::ReduceScatterOptions& o) override {
    return calls_->reduce_scatter_base(out, in, o);
  }
  work_ptr alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                         std::vector<int64_t>& in_splits, const ::c10d::AllToAllOptions&) override {
    return calls_->alltoall_base(out, in, out_splits, in_splits);
  }
  work_ptr alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                    const ::c10d::AllToAllOptions&) override {
    return calls_->alltoall(out, in);
  }
  work_ptr send(std::vector<at::Tensor>& t, int dst, int tag) override { return calls_->send(t, dst, tag); }
  work_ptr recv(std::vector<at::Tensor>& t, int src, int tag) override { return calls_->recv(t, src, tag); }
  work_ptr recvAnysource(std::vector<at::Tensor>& t, int tag) override { return calls_->recv(t, -1, tag); }
  work_ptr barrier(const ::c10d::BarrierOptions&) override { return calls_->barrier(); }

  /// The data plane under this group (tests, metrics).
  c10d_calls& calls() { return *calls_; }
  /// torch.distributed.destroy_process_group: ends what is pending and closes the connections
  /// now, whoever still holds the group; its later calls raise. Idempotent.
  void shut_down();

 private:
  std::unique_ptr<c10d_calls> calls_;
};

}  // namespace chorus::python
