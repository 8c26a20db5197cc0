// The C API's wire options (chorus_enqueue_*_wire, chorus_nonfinite_ranks) in a job of one
// rank: fp16 results are the input rounded to fp16 (and prescaled), bf16 allgather rows too,
// an integer tensor asked to compress is rejected naming it, bad codes are rejected, and the
// NaN check reports rank 0 in skip mode and fails the operation in error mode; a priority is
// set by id (chorus_set_priority), an unknown id refused.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/core/half.hpp"
#include "tests/support/c_api_fixture.hpp"

namespace chorus::testing {
namespace {

TEST_F(c_api, fp16_allreduce_rounds_to_fp16_and_prescales) {
  int64_t id = chorus_register("wire.c.fp16");
  std::vector<float> g = {1.0f, 0.1f, 65504.0f, -3.14159f, 1e-6f};
  auto in = g;
  int64_t shape[] = {5};
  chorus_wire_options w{CHORUS_COMPRESSION_FP16, CHORUS_NAN_CHECK_DEFAULT, 0.5f};
  int64_t h = chorus_enqueue_allreduce_wire(id, g.data(), shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, &w, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], f16_to_f32(f32_to_f16(in[i] * 0.5f))) << i;
  chorus_release(h);
}

TEST_F(c_api, bf16_allgather_rows_are_bf16_values) {
  int64_t id = chorus_register("wire.c.gather");
  std::vector<double> g = {1.0 / 3, 1e30, -7.0};
  int64_t shape[] = {3, 1};
  chorus_wire_options w{CHORUS_COMPRESSION_BF16, CHORUS_NAN_CHECK_OFF, 1.0f};
  int64_t h = chorus_enqueue_allgather_wire(id, g.data(), shape, 2, CHORUS_FLOAT64, &w, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  const auto* out = static_cast<const double*>(chorus_gathered_data(h));
  ASSERT_EQ(chorus_gathered_bytes(h), 24);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], double(bf16_to_f32(f32_to_bf16(float(g[i]))))) << i;
  chorus_release(h);
}

TEST_F(c_api, an_integer_tensor_asked_to_compress_is_rejected_naming_it) {
  int64_t id = chorus_register("wire.c.ints");
  std::vector<int32_t> v(4, 1);
  int64_t shape[] = {4};
  chorus_wire_options w{CHORUS_COMPRESSION_FP16, CHORUS_NAN_CHECK_DEFAULT, 1.0f};
  EXPECT_EQ(chorus_enqueue_allreduce_wire(id, v.data(), shape, 1, CHORUS_INT32, CHORUS_OP_SUM, &w, nullptr, nullptr),
            -1);
  EXPECT_TRUE(has(chorus_last_error(), "'wire.c.ints'")) << chorus_last_error();
  EXPECT_TRUE(has(chorus_last_error(), "i32")) << chorus_last_error();
  chorus_wire_options bad{7, CHORUS_NAN_CHECK_DEFAULT, 1.0f};
  std::vector<float> f(4, 1.0f);
  EXPECT_EQ(chorus_enqueue_allreduce_wire(id, f.data(), shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, &bad, nullptr, nullptr),
            -1);
  EXPECT_TRUE(has(chorus_last_error(), "compression 7")) << chorus_last_error();
  chorus_wire_options minimum{CHORUS_COMPRESSION_BF16, CHORUS_NAN_CHECK_DEFAULT, 1.0f};
  EXPECT_EQ(chorus_enqueue_allreduce_wire(id, f.data(), shape, 1, CHORUS_FLOAT32, CHORUS_OP_MIN, &minimum, nullptr,
                                          nullptr),
            -1);
  EXPECT_TRUE(has(chorus_last_error(), "sum and average")) << chorus_last_error();
}

TEST_F(c_api, nan_check_skip_lists_the_rank_and_error_fails) {
  int64_t id = chorus_register("wire.c.nan");
  std::vector<float> v = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  int64_t shape[] = {3};
  chorus_wire_options skip{CHORUS_COMPRESSION_DEFAULT, CHORUS_NAN_CHECK_SKIP, 1.0f};
  int64_t h = chorus_enqueue_allreduce_wire(id, v.data(), shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, &skip, nullptr,
                                            nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  int ranks[4] = {-1, -1, -1, -1};
  EXPECT_EQ(chorus_nonfinite_ranks(h, ranks, 4), 1);
  EXPECT_EQ(ranks[0], 0);
  chorus_release(h);
  chorus_wire_options error{CHORUS_COMPRESSION_FP16, CHORUS_NAN_CHECK_ERROR, 1.0f};
  h = chorus_enqueue_allreduce_wire(id, v.data(), shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, &error, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(h, 10000), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(chorus_error_string(h), "rank(s) 0")) << chorus_error_string(h);
  EXPECT_EQ(chorus_nonfinite_ranks(h, ranks, 4), 0);
  chorus_release(h);
}

TEST_F(c_api, a_priority_is_set_by_id_and_an_unknown_id_is_refused) {
  EXPECT_EQ(chorus_set_priority(1 << 30, 3), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_set_priority")) << chorus_last_error();
  EXPECT_TRUE(has(chorus_last_error(), "not registered")) << chorus_last_error();
  int64_t id = chorus_register("wire.c.priority");
  ASSERT_EQ(chorus_set_priority(id, 42), CHORUS_OK) << chorus_last_error();
  std::vector<float> g = {1.0f, 2.0f};
  int64_t shape[] = {2};
  int64_t h = chorus_enqueue_allreduce(id, g.data(), shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  EXPECT_EQ(g, (std::vector<float>{1.0f, 2.0f}));
  chorus_release(h);
}

}  // namespace
}  // namespace chorus::testing
