// chorus-bench pipeline: each step enqueues the 161 gradient tensors of ResNet-50 (f32, average)
// in reverse layer order through the actor pipeline, optionally with compute between them, and
// waits for every callback. The same bytes then go through the bare data plane as one fused
// allreduce (the best the collectives can do). Prints
//   RESULT pipeline <N> <step_ms> <bare_collectives_ms> <negotiation_p50_us> <negotiation_p99_us>
// Times are medians over the timed steps of the per-step max over ranks.
#include "bench/pipeline/pipeline_bench.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/fusion/resnet50_sizes.hpp"

namespace chorus::bench {
namespace {

using clock_type = std::chrono::steady_clock;

float* pretouched_floats(std::size_t count) {
  void* p = mmap(nullptr, count * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the gradient buffers");
  std::memset(p, 0, count * sizeof(float));
  return static_cast<float*>(p);
}

void spin_for(std::chrono::microseconds d) {
  auto end = clock_type::now() + d;
  while (clock_type::now() < end) {
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void check(const status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

}  // namespace

int run_pipeline_bench(communicator& comm, int steps, std::chrono::microseconds compute) {
  auto opts = pipeline_options::from_env();
  if (!opts) throw std::runtime_error(opts.error().to_string());
  auto pipe = pipeline::start(comm, *opts);
  if (!pipe) throw std::runtime_error(pipe.error().to_string());

  std::size_t total = resnet50_parameter_count;
  float* grads = pretouched_floats(total);
  std::vector<std::size_t> offset(resnet50_tensor_count + 1, 0);
  for (std::size_t i = 0; i < resnet50_tensor_count; ++i) offset[i + 1] = offset[i] + resnet50_sizes[i];

  auto refill = [&] {
    float v = static_cast<float>(comm.rank() + 1);
    std::fill(grads, grads + total, v);
  };
  // Mean of (rank + 1) over ranks.
  float want = static_cast<float>(comm.size() + 1) / 2.0f;

  constexpr int warmups = 3;
  std::vector<double> step_ms, bare_ms;
  for (int s = 0; s < warmups + steps; ++s) {
    refill();
    check(comm.barrier(), "barrier");
    std::atomic<int> left{static_cast<int>(resnet50_tensor_count)};
    std::atomic<bool> failed{false};
    std::string error;
    auto t0 = clock_type::now();
    for (std::size_t k = resnet50_tensor_count; k-- > 0;) {  // backward: output layer first
      if (compute.count()) spin_for(compute);
      op_request r;
      r.spec.name = "resnet50.param" + std::to_string(k);
      r.spec.kind = collective_kind::allreduce;
      r.spec.type = dtype::f32;
      r.spec.shape = {static_cast<int64_t>(resnet50_sizes[k])};
      r.spec.op = reduce_op::average;
      r.spec.device = device_kind::cpu;
      r.input = r.output = grads + offset[k];
      r.done = [&](const status& st, std::vector<std::byte>, std::vector<int64_t>) {
        if (!st.ok() && !failed.exchange(true)) error = st.to_string();
        if (left.fetch_sub(1) == 1) left.notify_all();
      };
      (*pipe)->enqueue(std::move(r));
    }
    for (int l = left.load(); l != 0; l = left.load()) left.wait(l);
    auto t1 = clock_type::now();
    if (failed) throw std::runtime_error("pipeline step failed: " + error);
    for (std::size_t k = 0; k < resnet50_tensor_count; ++k)
      if (grads[offset[k]] != want) throw std::runtime_error("wrong average in tensor " + std::to_string(k));

    refill();
    check(comm.barrier(), "barrier");
    auto b0 = clock_type::now();
    check(comm.allreduce(grads, total, dtype::f32, reduce_op::average), "bare allreduce");
    auto b1 = clock_type::now();
    if (grads[total - 1] != want) throw std::runtime_error("wrong bare allreduce result");
    if (s >= warmups) {
      step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      bare_ms.push_back(std::chrono::duration<double, std::milli>(b1 - b0).count());
    }
  }
  check(comm.allreduce(step_ms.data(), step_ms.size(), dtype::f64, reduce_op::max), "max of step times");
  check(comm.allreduce(bare_ms.data(), bare_ms.size(), dtype::f64, reduce_op::max), "max of bare times");
  auto stats = (*pipe)->stats();
  if (comm.rank() == 0) {
    std::printf("# pipeline: %zu tensors, %.1f MB per step, %d timed steps, compute %lld us per tensor\n",
                resnet50_tensor_count, static_cast<double>(total) * 4 / 1e6, steps,
                static_cast<long long>(compute.count()));
    std::printf("RESULT pipeline %d %.2f %.2f %.0f %.0f\n", comm.size(), median(step_ms), median(bare_ms),
                stats.negotiation.p50_us, stats.negotiation.p99_us);
    std::fflush(stdout);
  }
  (*pipe)->shutdown();
  return 0;
}

}  // namespace chorus::bench
