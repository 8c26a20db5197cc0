// resnet_steps: one ResNet-50 gradient step through a pipeline, timed and checked (the same
// workload as chorus-bench pipeline's, bench/pipeline/pipeline_bench.cpp).
#include "bench/autotune/resnet_steps.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

#include "actors/pipeline.hpp"
#include "bench/pipeline/resnet_backward.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/fusion/resnet50_sizes.hpp"

namespace chorus::bench {
namespace {

using clock_type = std::chrono::steady_clock;

void check(const status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

}  // namespace

resnet_steps::resnet_steps(communicator& comm, std::chrono::microseconds compute)
    : comm_(comm), compute_(compute), offset_(resnet50_tensor_count + 1, 0) {
  void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the gradient buffers");
  std::memset(p, 0, bytes());
  grads_ = static_cast<float*>(p);
  for (std::size_t i = 0; i < resnet50_tensor_count; ++i) offset_[i + 1] = offset_[i] + resnet50_sizes[i];
}

resnet_steps::~resnet_steps() { munmap(grads_, bytes()); }

std::size_t resnet_steps::bytes() const { return resnet50_parameter_count * sizeof(float); }

resnet_steps::step resnet_steps::run(pipeline& pipe, bool flag) {
  const float mine = static_cast<float>(comm_.rank() + 1);
  const float want = static_cast<float>(comm_.size() + 1) / 2.0f;  // mean of rank + 1
  std::fill(grads_, grads_ + resnet50_parameter_count, mine);
  check(comm_.barrier(), "barrier");
  const double ms = resnet_backward_step(pipe, grads_, offset_, compute_);
  for (std::size_t k = 0; k < resnet50_tensor_count; ++k)
    if (grads_[offset_[k]] != want || grads_[offset_[k + 1] - 1] != want)
      throw std::runtime_error("autotune bench: wrong average in resnet50.param" + std::to_string(k));
  // The maximum of the time and of "not flag": all_flag when no rank voted against.
  double agreed[2] = {ms, flag ? 0.0 : 1.0};
  check(comm_.allreduce(agreed, 2, dtype::f64, reduce_op::max), "max of step times");
  return {agreed[0], agreed[1] == 0.0};
}

double resnet_steps::bare() {
  const float mine = static_cast<float>(comm_.rank() + 1);
  const float want = static_cast<float>(comm_.size() + 1) / 2.0f;
  std::fill(grads_, grads_ + resnet50_parameter_count, mine);
  check(comm_.barrier(), "barrier");
  auto t0 = clock_type::now();
  check(comm_.allreduce(grads_, resnet50_parameter_count, dtype::f32, reduce_op::average), "bare allreduce");
  double ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
  if (grads_[0] != want || grads_[resnet50_parameter_count - 1] != want)
    throw std::runtime_error("autotune bench: wrong bare allreduce result");
  check(comm_.allreduce(&ms, 1, dtype::f64, reduce_op::max), "max of bare times");
  return ms;
}

}  // namespace chorus::bench
