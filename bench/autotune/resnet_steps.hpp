// One training step's gradients for the autotune benchmark: the 161 ResNet-50 tensors (f32,
// average) enqueued in reverse layer order with `compute` of busy work before each, through a
// given pipeline; the step's time is the maximum over ranks (one small allreduce on the
// communicator after the step, outside the timed span). Results are checked exactly.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace chorus {
class communicator;
class pipeline;
}  // namespace chorus

namespace chorus::bench {

class resnet_steps {
 public:
  resnet_steps(communicator& comm, std::chrono::microseconds compute);
  ~resnet_steps();
  resnet_steps(const resnet_steps&) = delete;
  resnet_steps& operator=(const resnet_steps&) = delete;

  struct step {
    double ms = 0;         ///< the step's wall time, maximum over ranks
    bool all_flag = false; ///< `flag` was true on every rank
  };
  /// Runs one step through `pipe` (every rank alike); throws std::runtime_error on a failed
  /// or wrong result. `flag` is this rank's vote, agreed with the time (see step::all_flag).
  step run(pipeline& pipe, bool flag = false);

  /// The same bytes as one fused allreduce on the communicator's data plane (no pipeline), ms,
  /// maximum over ranks: what the communicator's own connections allow.
  double bare();

  /// Bytes of gradients per step.
  std::size_t bytes() const;

 private:
  communicator& comm_;
  std::chrono::microseconds compute_;
  float* grads_ = nullptr;
  std::vector<std::size_t> offset_;
};

}  // namespace chorus::bench
