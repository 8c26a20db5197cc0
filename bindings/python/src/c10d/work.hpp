// A torch Work for one Chorus call: completed exactly once by the group's completion thread (or
// by the calling thread for calls that ran there), with its future marked at the same moment, so
// that DDP's reducer and comm hooks, which chain on futures, see every result.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::python {

class chorus_work final : public ::c10d::Work {
 public:
  /// `outputs`: what result() and the future's value hold once it ended.
  chorus_work(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs);
  /// Ends the work: `st` ok marks the future with the outputs, else sets its error and the
  /// exception wait() throws (a RuntimeError with st's message). `source`: recv's sender.
  void complete(const status& st, int source = -1);
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  /// Made at the first call (a blocking call never asks for it), marked then if the work
  /// already ended, else when it ends.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  /// Marks `f` with the outputs or the error (outside mutex_: its callbacks run here).
  void mark(const c10::intrusive_ptr<c10::ivalue::Future>& f) const;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // under mutex_
  bool future_marked_ = false;                       // under mutex_: marked once, by one side
  int source_ = -1;
};

}  // namespace chorus::python
