// CUDA tensors through the C++ and C APIs in a job of one rank (label gpu): allreduce and
// broadcast on device memory (the NCCL path, and host staging with CHORUS_GPU_OPERATIONS=host),
// the ready event on the caller's stream, and the errors for a wrong device. Every case skips
// with a message where CUDA sees no device.
#include "tests/support/one_rank_api.hpp"
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/chorus.hpp"
#include "runtime/device/gpu.hpp"

namespace chorus {
namespace {

using testing::clear_launcher_env;
using testing::mentions;

/// Device memory for `n` floats, freed at the end of the test.
struct device_floats {
  explicit device_floats(std::size_t n) : n(n) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) != cudaSuccess) p = nullptr;
  }
  ~device_floats() { cudaFree(p); }
  void set(const std::vector<float>& v) { cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice); }
  std::vector<float> get() const {
    std::vector<float> v(n);
    cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }
  float* p = nullptr;
  std::size_t n;
};

tensor_view cuda_view(float* p, std::size_t n, void* stream = nullptr) {
  tensor_view v{p, dtype::f32, {static_cast<int64_t>(n)}, device_kind::cuda};
  v.device_index = 0;
  v.stream = stream;
  return v;
}

class cuda_api : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (gpu::visible_devices() == 0) GTEST_SKIP() << "no usable CUDA device (CUDA reports none)";
    clear_launcher_env();
    ::setenv("CHORUS_GPU_OPERATIONS", GetParam(), 1);
    auto st = init();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  void TearDown() override {
    shutdown();
    ::unsetenv("CHORUS_GPU_OPERATIONS");
  }
};

TEST_P(cuda_api, allreduce_of_device_memory_is_exact) {
  const std::size_t n = (3u << 20) + 5;  // several staging chunks, an odd tail
  device_floats d(n);
  ASSERT_NE(d.p, nullptr);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000);
  d.set(v);
  for (auto op : {reduce_op::sum, reduce_op::average, reduce_op::max}) {
    auto st = allreduce_async("cuda.w", cuda_view(d.p, n), op).wait(std::chrono::seconds(60));
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(d.get(), v);  // one rank: every reduction is the identity
  }
}

TEST_P(cuda_api, reads_only_after_the_work_queued_on_the_callers_stream) {
  const std::size_t n = 1u << 20;
  device_floats d(n), src(n);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  src.set(std::vector<float>(n, 7.0f));
  d.set(std::vector<float>(n, 0.0f));
  // Queued, not yet run when the allreduce is submitted: many copies of 4 MiB back to back.
  for (int i = 0; i < 200; ++i) cudaMemcpyAsync(d.p, src.p, n * sizeof(float), cudaMemcpyDeviceToDevice, s);
  auto st = allreduce_async("cuda.ready", cuda_view(d.p, n, s), reduce_op::sum).wait(std::chrono::seconds(60));
  ASSERT_TRUE(st.ok()) << st.to_string();
  cudaStreamSynchronize(s);
  EXPECT_EQ(d.get(), std::vector<float>(n, 7.0f));
  cudaStreamDestroy(s);
}

TEST_P(cuda_api, broadcast_and_the_c_api) {
  const std::size_t n = 4096;
  device_floats d(n);
  d.set(std::vector<float>(n, 3.0f));
  auto st = broadcast_async("cuda.b", cuda_view(d.p, n), 0).wait(std::chrono::seconds(60));
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(d.get(), std::vector<float>(n, 3.0f));
  int64_t id = chorus_register("cuda.c");
  int64_t shape = static_cast<int64_t>(n);
  chorus_device dev{CHORUS_DEVICE_CUDA, 0, nullptr};
  int64_t h = chorus_enqueue_allreduce_on(id, d.p, &shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, dev, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(h, 60000), CHORUS_OK) << chorus_last_error();
  chorus_release(h);
  EXPECT_EQ(d.get(), std::vector<float>(n, 3.0f));
}

TEST_P(cuda_api, host_memory_or_the_wrong_device_is_refused_naming_the_tensor) {
  std::vector<float> host(16, 1.0f);
  auto st = allreduce_async("cuda.host", cuda_view(host.data(), host.size()), reduce_op::sum).wait();
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  EXPECT_TRUE(mentions(st, "cuda.host") && mentions(st, "not CUDA device memory")) << st.to_string();
  device_floats d(16);
  auto v = cuda_view(d.p, 16);
  v.device_index = 5;
  st = allreduce_async("cuda.wrongdev", v, reduce_op::sum).wait();
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  EXPECT_TRUE(mentions(st, "cuda.wrongdev") && mentions(st, "cuda:5")) << st.to_string();
  st = allgather_async("cuda.gather", cuda_view(d.p, 16)).wait();
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
}

INSTANTIATE_TEST_SUITE_P(backends, cuda_api, ::testing::Values("nccl", "host"));

}  // namespace
}  // namespace chorus
