// The C++ API's reducescatter, alltoall and join in a job of one rank (no launcher variables): the
// results of all forms (handle, caller buffer, callbacks), reducescatter_rows (Horovod's split),
// and boundary checks whose errors name the tensor and the value. Multi-rank results are
// checked in tests/multiproc/pipeline_scatter_test.cpp.
#include "tests/support/one_rank_api.hpp"
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

using testing::clear_launcher_env;
using testing::mentions;
using api_scatter = testing::one_rank_api;

template <class T>
std::vector<T> as(const std::vector<std::byte>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

TEST(reducescatter_rows, is_horovods_split_of_dim_0) {
  EXPECT_EQ(reducescatter_rows(10, 4, 0), 3);
  EXPECT_EQ(reducescatter_rows(10, 4, 1), 3);
  EXPECT_EQ(reducescatter_rows(10, 4, 2), 2);
  EXPECT_EQ(reducescatter_rows(10, 4, 3), 2);
  EXPECT_EQ(reducescatter_rows(2, 3, 2), 0);
  EXPECT_EQ(reducescatter_rows(5, 1, 0), 5);
  EXPECT_EQ(reducescatter_rows(5, 2, 2), 0);  // not a rank
}

TEST_F(api_scatter, reducescatter_of_one_rank_is_the_whole_tensor_and_leaves_the_input) {
  std::vector<float> in{1, 2, 3, 4, 5, 6};
  auto h = reducescatter_async("rs", {in.data(), dtype::f32, {3, 2}}, reduce_op::sum);
  ASSERT_TRUE(h.wait(30s).ok()) << h.result().to_string();
  EXPECT_EQ(h.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(as<float>(h.gathered()), in);
  EXPECT_EQ(static_cast<const void*>(h.gathered_data()), static_cast<const void*>(h.gathered().data()));

  std::vector<int32_t> ints{7, -3}, out(2, 0);
  auto h2 = reducescatter_async("rs.out", {ints.data(), dtype::i32, {2}}, {out.data(), dtype::i32, {2}},
                                reduce_op::average);
  ASSERT_TRUE(h2.wait(30s).ok()) << h2.result().to_string();
  EXPECT_EQ(out, ints);
  EXPECT_TRUE(h2.gathered().empty());
  EXPECT_EQ(h2.shape(), (std::vector<int64_t>{2}));
}

TEST_F(api_scatter, alltoall_of_one_rank_returns_the_rows_and_splits) {
  std::vector<int64_t> rows{1, 2, 3, 4, 5, 6};
  auto h = alltoall_async("a2a", {rows.data(), dtype::i64, {3, 2}}, {3});
  ASSERT_TRUE(h.wait(30s).ok()) << h.result().to_string();
  EXPECT_EQ(as<int64_t>(h.gathered()), rows);
  EXPECT_EQ(h.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(h.received_splits(), (std::vector<int64_t>{3}));
  auto empty = alltoall_async("a2a.empty", {nullptr, dtype::f32, {0, 5}}, {0});
  ASSERT_TRUE(empty.wait(30s).ok()) << empty.result().to_string();
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(empty.received_splits(), (std::vector<int64_t>{0}));
}

TEST_F(api_scatter, callback_forms_run_exactly_once_with_the_result) {
  std::atomic<int> rs_calls{0}, a2a_calls{0};
  std::vector<double> in{1.5, 2.5};
  std::vector<std::byte> rs_bytes, a2a_bytes;
  std::vector<int64_t> rs_shape, a2a_splits;
  reducescatter_async("cb.rs", {in.data(), dtype::f64, {2}}, reduce_op::max,
                      [&](const status& st, const std::vector<std::byte>& g, const std::vector<int64_t>& shape) {
                        EXPECT_TRUE(st.ok()) << st.to_string();
                        rs_bytes = g;
                        rs_shape = shape;
                        ++rs_calls;
                      });
  alltoall_async("cb.a2a", {in.data(), dtype::f64, {2}}, {2},
                 [&](const status& st, const std::vector<std::byte>& g, const std::vector<int64_t>&,
                     const std::vector<int64_t>& splits) {
                   EXPECT_TRUE(st.ok()) << st.to_string();
                   a2a_bytes = g;
                   a2a_splits = splits;
                   ++a2a_calls;
                 });
  for (int i = 0; i < 3000 && (rs_calls == 0 || a2a_calls == 0); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(rs_calls, 1);
  EXPECT_EQ(a2a_calls, 1);
  EXPECT_EQ(as<double>(rs_bytes), in);
  EXPECT_EQ(rs_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(as<double>(a2a_bytes), in);
  EXPECT_EQ(a2a_splits, (std::vector<int64_t>{2}));
}

TEST_F(api_scatter, rejected_arguments_name_the_tensor_and_the_value) {
  float x[4] = {1, 2, 3, 4};
  struct expectation {
    handle h;
    std::vector<std::string> parts;
  };
  std::vector<expectation> cases;
  cases.push_back({reducescatter_async("rs.scalar", {x, dtype::f32, {}}), {"reducescatter('rs.scalar')", "scalar"}});
  cases.push_back({reducescatter_async("rs.out", {x, dtype::f32, {4}}, {x, dtype::f32, {3}}, reduce_op::sum),
                   {"reducescatter('rs.out')", "[3]", "[4]"}});
  cases.push_back({reducescatter_async("rs.dtype", {x, dtype::f32, {4}}, {x, dtype::i32, {4}}, reduce_op::sum),
                   {"reducescatter('rs.dtype')", "i32"}});
  cases.push_back({reducescatter_async("rs.neg", {x, dtype::f32, {3, -2}}), {"reducescatter('rs.neg')", "negative"}});
  cases.push_back({alltoall_async("a2a.count", {x, dtype::f32, {4}}, {2, 2}), {"alltoall('a2a.count')", "2 splits"}});
  cases.push_back({alltoall_async("a2a.sum", {x, dtype::f32, {4}}, {3}), {"alltoall('a2a.sum')", "sum to 3", "4"}});
  cases.push_back({alltoall_async("a2a.neg", {x, dtype::f32, {4}}, {-1}), {"alltoall('a2a.neg')", "negative"}});
  cases.push_back({alltoall_async("a2a.scalar", {x, dtype::f32, {}}, {1}), {"alltoall('a2a.scalar')", "scalar"}});
  for (auto& c : cases) {
    ASSERT_TRUE(c.h.poll()) << c.h.name();
    EXPECT_EQ(c.h.result().code(), errc::invalid_argument) << c.h.result().to_string();
    for (auto& p : c.parts) EXPECT_TRUE(mentions(c.h.result(), p)) << c.h.result().to_string() << " lacks " << p;
    EXPECT_TRUE(c.h.gathered().empty());
  }
}

TEST_F(api_scatter, join_of_one_rank_ends_at_once_naming_rank_0) {
  auto h = join_async();
  ASSERT_TRUE(h.wait(30s).ok()) << h.result().to_string();
  EXPECT_EQ(h.last_rank(), 0);
  std::atomic<int> calls{0}, last{-2};
  join_async([&](const status& st, int r) {
    EXPECT_TRUE(st.ok()) << st.to_string();
    last = r;
    ++calls;
  });
  for (int i = 0; i < 3000 && calls == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(last, 0);
  float x = 3;  // the job goes on
  ASSERT_TRUE(allreduce_async("after.join", {&x, dtype::f32, {}}, reduce_op::sum).wait(30s).ok());
  EXPECT_EQ(x, 3.0f);
}

TEST(api_join, without_a_job_is_rejected) {
  clear_launcher_env();
  auto h = join_async();
  ASSERT_TRUE(h.poll());
  // invalid_argument before any init in this process, shutdown after an earlier test's job.
  EXPECT_TRUE(h.result().code() == errc::invalid_argument || h.result().code() == errc::shutdown)
      << h.result().to_string();
  EXPECT_TRUE(mentions(h.result(), "join")) << h.result().to_string();
  EXPECT_TRUE(mentions(h.result(), "init()")) << h.result().to_string();
  EXPECT_EQ(h.last_rank(), -1);
}

}  // namespace
}  // namespace chorus
