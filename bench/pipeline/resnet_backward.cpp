// The ResNet-50 backward pass through the pipeline (resnet_backward.hpp).
#include "bench/pipeline/resnet_backward.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

#include "actors/pipeline.hpp"
#include "runtime/fusion/resnet50_sizes.hpp"

namespace chorus::bench {

void spin_for(std::chrono::microseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

double resnet_backward_step(pipeline& pipe, float* grads, const std::vector<std::size_t>& offset,
                            std::chrono::microseconds compute, compression wire, nan_check check) {
  std::atomic<int> left{static_cast<int>(resnet50_tensor_count)};
  std::atomic<bool> failed{false};
  std::string error;
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t k = resnet50_tensor_count; k-- > 0;) {  // backward: output layer first
    if (compute.count()) spin_for(compute);
    op_request r;
    r.spec.name = "resnet50.param" + std::to_string(k);
    r.spec.kind = collective_kind::allreduce;
    r.spec.type = dtype::f32;
    r.spec.shape = {static_cast<int64_t>(resnet50_sizes[k])};
    r.spec.op = reduce_op::average;
    r.spec.device = device_kind::cpu;
    r.spec.wire = wire;
    r.spec.check = check;
    r.input = r.output = grads + offset[k];
    r.done = [&](const status& st, std::vector<std::byte>, std::vector<int64_t>) {
      if (!st.ok() && !failed.exchange(true)) error = st.to_string();
      if (left.fetch_sub(1) == 1) left.notify_all();
    };
    pipe.enqueue(std::move(r));
  }
  for (int l = left.load(); l != 0; l = left.load()) left.wait(l);
  auto t1 = std::chrono::steady_clock::now();
  if (failed) throw std::runtime_error("a ResNet-50 step failed: " + error);
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace chorus::bench
