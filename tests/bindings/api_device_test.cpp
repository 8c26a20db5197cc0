// CUDA tensors at the C++ API's boundary, on any machine (no device needed): a view that says
// cuda but holds host memory, the collectives that have no device path, and a bad
// CHORUS_GPU_OPERATIONS each end with a clear error naming the tensor or the variable.
#include "tests/support/one_rank_api.hpp"
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus {
namespace {

using testing::mentions;
using api = testing::one_rank_api;

TEST_F(api, a_cuda_view_of_host_memory_is_refused_naming_the_tensor) {
  std::vector<float> host(8, 1.0f);
  tensor_view v{host.data(), dtype::f32, {8}, device_kind::cuda};
  auto st = allreduce_async("dev.host", v, reduce_op::sum).wait();
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  EXPECT_TRUE(mentions(st, "dev.host")) << st.to_string();
  EXPECT_EQ(host, std::vector<float>(8, 1.0f));
}

TEST_F(api, collectives_without_a_device_path_refuse_cuda_views) {
  std::vector<float> host(8, 1.0f);
  tensor_view v{host.data(), dtype::f32, {8}, device_kind::cuda};
  auto st = allgather_async("dev.gather", v).wait();
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  EXPECT_TRUE(mentions(st, "dev.gather") && mentions(st, "CUDA")) << st.to_string();
}

TEST(api_device_config, a_bad_gpu_operations_value_fails_init_naming_the_variable) {
  testing::clear_launcher_env();
  ::setenv("CHORUS_GPU_OPERATIONS", "mpi", 1);
  auto st = init();
  ::unsetenv("CHORUS_GPU_OPERATIONS");
  shutdown();
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(mentions(st, "CHORUS_GPU_OPERATIONS")) << st.to_string();
}

}  // namespace
}  // namespace chorus
