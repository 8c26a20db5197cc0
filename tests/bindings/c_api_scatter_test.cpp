// The C API's reducescatter, alltoall and join (chorus.h) in a job of one rank: every form with
// and without callbacks (owned rows, a caller buffer), the result rows, splits and last rank read
// from the handle and inside the callback, chorus_reducescatter_rows (Horovod's split), and an
// error text naming the tensor for every rejected call (the other calls: c_api_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "tests/support/c_api_callbacks.hpp"
#include "tests/support/c_api_fixture.hpp"
#include "tests/support/one_rank_api.hpp"

namespace {

using chorus::testing::bad_case;
using chorus::testing::c_api;
using chorus::testing::callback_log;
using chorus::testing::clear_launcher_env;
using chorus::testing::expect_each_rejected;
using chorus::testing::has;
using chorus::testing::record;

/// What a callback saw of its handle's results, read inside the callback.
struct rows_log {
  std::atomic<int> calls{0};
  int status = -1;
  std::vector<float> rows;
  std::vector<int64_t> shape, splits;
  int last_rank = -2;
};

void record_rows(int64_t handle, int status, const char*, void* user) {
  auto* log = static_cast<rows_log*>(user);
  log->status = status;
  if (const auto* p = static_cast<const float*>(chorus_gathered_data(handle)))
    log->rows.assign(p, p + chorus_gathered_bytes(handle) / static_cast<int64_t>(sizeof(float)));
  int64_t dims[8];
  int nd = chorus_gathered_shape(handle, dims, 8);
  if (nd >= 0) log->shape.assign(dims, dims + nd);
  int64_t splits[8];
  int ns = chorus_received_splits(handle, splits, 8);
  if (ns >= 0) log->splits.assign(splits, splits + ns);
  log->last_rank = chorus_last_rank(handle);
  chorus_release(handle);
  ++log->calls;
}

/// Waits up to 10 s for the callback to run; true when it ran exactly once.
bool called_once(const std::atomic<int>& calls) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return calls == 1;
}

std::vector<int64_t> shape_of(int64_t h) {
  int64_t dims[8];
  int nd = chorus_gathered_shape(h, dims, 8);
  return nd < 0 ? std::vector<int64_t>{-1} : std::vector<int64_t>(dims, dims + nd);
}

TEST(c_api_lifecycle, reducescatter_rows_is_horovods_split) {
  EXPECT_EQ(chorus_reducescatter_rows(7, 3, 0), 3);
  EXPECT_EQ(chorus_reducescatter_rows(7, 3, 1), 2);
  EXPECT_EQ(chorus_reducescatter_rows(7, 3, 2), 2);
  EXPECT_EQ(chorus_reducescatter_rows(2, 3, 2), 0);
  EXPECT_EQ(chorus_reducescatter_rows(7, 3, 3), 0);  // no such rank
  EXPECT_EQ(chorus_reducescatter_rows(-1, 3, 0), 0);
}

TEST(c_api_lifecycle, join_before_init_is_rejected) {
  clear_launcher_env();
  callback_log log;
  EXPECT_EQ(chorus_enqueue_join(record, &log), -1);
  EXPECT_TRUE(has(chorus_last_error(), "join: Chorus ")) << chorus_last_error();
  // "is not initialized" in a fresh process, "was shut down" after an earlier test's job.
  EXPECT_TRUE(has(chorus_last_error(), "call chorus::init()")) << chorus_last_error();
  EXPECT_EQ(log.calls.load(), 0);
}

TEST_F(c_api, reducescatter_owned_and_into_a_caller_buffer) {
  std::vector<double> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  int64_t shape[] = {5, 2};
  int64_t h = chorus_enqueue_reducescatter(chorus_register("rs.owned"), in.data(), shape, 2, CHORUS_FLOAT64,
                                           CHORUS_OP_AVERAGE, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  ASSERT_EQ(chorus_gathered_bytes(h), 80);
  const auto* got = static_cast<const double*>(chorus_gathered_data(h));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(std::vector<double>(got, got + 10), in);
  EXPECT_EQ(shape_of(h), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(chorus_received_splits(h, nullptr, 0), -1);  // not an alltoall
  EXPECT_EQ(chorus_last_rank(h), -1);                    // not a join
  chorus_release(h);

  std::vector<int32_t> ints = {3, -4, 5};
  std::vector<int32_t> out(3, 0);
  int64_t ishape[] = {3};
  h = chorus_enqueue_reducescatter_into(chorus_register("rs.into"), ints.data(), ishape, 1, CHORUS_INT32,
                                        CHORUS_OP_SUM, out.data(), chorus_reducescatter_rows(3, 1, 0), nullptr,
                                        nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  EXPECT_EQ(out, ints);
  EXPECT_EQ(chorus_gathered_bytes(h), 0);  // the slice is in the caller's buffer
  EXPECT_EQ(chorus_gathered_data(h), nullptr);
  EXPECT_EQ(shape_of(h), (std::vector<int64_t>{3}));
  chorus_release(h);
}

TEST_F(c_api, reducescatter_callback_reads_the_slice_inside_the_callback) {
  std::vector<float> in = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
  int64_t shape[] = {3, 2};
  rows_log log;
  int64_t h = chorus_enqueue_reducescatter(chorus_register("rs.cb"), in.data(), shape, 2, CHORUS_FLOAT32,
                                           CHORUS_OP_MAX, record_rows, &log);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_TRUE(called_once(log.calls));
  EXPECT_EQ(log.status, CHORUS_OK);
  EXPECT_EQ(log.rows, in);
  EXPECT_EQ(log.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(log.last_rank, -1);
  EXPECT_EQ(chorus_poll(h), -1) << "released inside the callback";
}

TEST_F(c_api, alltoall_with_splits_handle_and_callback) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6};
  int64_t shape[] = {3, 2};
  int64_t splits[] = {3};
  int64_t h = chorus_enqueue_alltoall(chorus_register("a2a"), in.data(), shape, 2, CHORUS_FLOAT32, splits, 1,
                                      nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  ASSERT_EQ(chorus_gathered_bytes(h), 24);
  const auto* got = static_cast<const float*>(chorus_gathered_data(h));
  EXPECT_EQ(std::vector<float>(got, got + 6), in);
  EXPECT_EQ(shape_of(h), (std::vector<int64_t>{3, 2}));
  int64_t received[4] = {-1, -1, -1, -1};
  EXPECT_EQ(chorus_received_splits(h, received, 4), 1);
  EXPECT_EQ(received[0], 3);
  EXPECT_EQ(received[1], -1) << "writes only chorus_size() entries";
  chorus_release(h);

  // No rows at all: an empty block is a valid alltoall.
  int64_t empty_shape[] = {0, 2};
  int64_t zero[] = {0};
  rows_log log;
  h = chorus_enqueue_alltoall(chorus_register("a2a.empty"), nullptr, empty_shape, 2, CHORUS_FLOAT32, zero, 1,
                              record_rows, &log);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_TRUE(called_once(log.calls));
  EXPECT_EQ(log.status, CHORUS_OK);
  EXPECT_TRUE(log.rows.empty());
  EXPECT_EQ(log.shape, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(log.splits, (std::vector<int64_t>{0}));
}

TEST_F(c_api, join_of_one_rank_names_it_as_the_last) {
  int64_t h = chorus_enqueue_join(nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  EXPECT_EQ(chorus_last_rank(h), 0);
  EXPECT_EQ(chorus_gathered_bytes(h), -1);  // a join has no rows
  chorus_release(h);
  EXPECT_EQ(chorus_last_rank(h), -1);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_last_rank: handle " + std::to_string(h))) << chorus_last_error();

  rows_log log;
  h = chorus_enqueue_join(record_rows, &log);
  ASSERT_GE(h, 0) << chorus_last_error();
  ASSERT_TRUE(called_once(log.calls));
  EXPECT_EQ(log.status, CHORUS_OK);
  EXPECT_EQ(log.last_rank, 0);
  // The job goes on after the join.
  float x = 2;
  int64_t ha = chorus_enqueue_allreduce(chorus_register("after.join"), &x, nullptr, 0, CHORUS_FLOAT32, CHORUS_OP_SUM,
                                        nullptr, nullptr);
  ASSERT_GE(ha, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(ha, 10000), CHORUS_OK) << chorus_error_string(ha);
  EXPECT_EQ(chorus_last_rank(ha), -1);
  chorus_release(ha);
}

TEST_F(c_api, every_rejected_scatter_or_alltoall_names_the_tensor_and_does_not_call_back) {
  float x[6] = {};
  int64_t shape[] = {3, 2};
  int64_t one[] = {3};
  int64_t two[] = {1, 2};
  int64_t short_split[] = {2};
  int64_t neg_split[] = {-1};
  int64_t wrapping[] = {INT64_MAX, INT64_MAX, 5};  // wraps to 3 = dim 0 in two's complement
  int64_t neg[] = {3, -2};
  int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 22};
  int64_t rs = chorus_register("rs.bad"), a2a = chorus_register("a2a.bad");
  callback_log log;
  std::vector<bad_case> cases = {
      {[&] { return chorus_enqueue_reducescatter(rs, x, nullptr, 0, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"reducescatter('rs.bad')", "scalar"}},
      {[&] {
         return chorus_enqueue_reducescatter(rs, x, shape, 2, CHORUS_FLOAT32, static_cast<chorus_op>(9), record, &log);
       },
       {"chorus_enqueue_reducescatter('rs.bad')", "op 9"}},
      {[&] { return chorus_enqueue_reducescatter(rs, nullptr, shape, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"reducescatter('rs.bad')", "data is null"}},
      {[&] { return chorus_enqueue_reducescatter(777, x, shape, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"tensor id 777"}},
      {[&] { return chorus_enqueue_reducescatter(rs, x, neg, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"reducescatter('rs.bad')", "[3,-2]", "negative"}},
      {[&] { return chorus_enqueue_reducescatter(rs, x, huge, 2, CHORUS_FLOAT64, CHORUS_OP_SUM, record, &log); },
       {"reducescatter('rs.bad')", "larger than 2^63 bytes"}},
      {[&] {
         return chorus_enqueue_reducescatter_into(rs, x, shape, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, x, 2, record, &log);
       },
       {"chorus_enqueue_reducescatter_into('rs.bad')", "out_rows is 2", "slice is [3,2]",
        "chorus_reducescatter_rows(3, 1, 0)"}},
      {[&] {
         return chorus_enqueue_reducescatter_into(rs, x, shape, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, 3, record,
                                                  &log);
       },
       {"chorus_enqueue_reducescatter_into('rs.bad')", "out is NULL", "[3,2] has 6 elements"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, two, 2, record, &log); },
       {"alltoall('a2a.bad')", "2 splits for a job of 1 ranks"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, nullptr, 1, record, &log); },
       {"chorus_enqueue_alltoall('a2a.bad')", "splits is NULL"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, one, -1, record, &log); },
       {"chorus_enqueue_alltoall('a2a.bad')", "nsplits is -1"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, short_split, 1, record, &log); },
       {"alltoall('a2a.bad')", "splits sum to 2 rows", "dim 0 is 3"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, neg_split, 1, record, &log); },
       {"alltoall('a2a.bad')", "split 0 is negative"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, wrapping, 3, record, &log); },
       {"alltoall('a2a.bad')", "split 1", "overflow"}},
      {[&] { return chorus_enqueue_alltoall(a2a, x, nullptr, 0, CHORUS_FLOAT32, one, 1, record, &log); },
       {"alltoall('a2a.bad')", "scalar"}},
      {[&] {
         return chorus_enqueue_alltoall(a2a, x, shape, 2, static_cast<chorus_dtype>(-3), one, 1, record, &log);
       },
       {"chorus_enqueue_alltoall('a2a.bad')", "dtype -3"}},
  };
  expect_each_rejected(cases);
  EXPECT_EQ(log.calls.load(), 0) << "a rejected call must not call back";
  // Each name is free again: nothing rejected stayed pending.
  int64_t h = chorus_enqueue_alltoall(a2a, x, shape, 2, CHORUS_FLOAT32, one, 1, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  chorus_release(h);
}

TEST_F(c_api, result_getters_on_unknown_handles_say_so) {
  int64_t splits[1];
  EXPECT_EQ(chorus_received_splits(424242, splits, 1), -1);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_received_splits: handle 424242")) << chorus_last_error();
  EXPECT_EQ(chorus_last_rank(424242), -1);
  EXPECT_TRUE(has(chorus_last_error(), "unknown")) << chorus_last_error();
  EXPECT_EQ(chorus_gathered_data(424242), nullptr);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_gathered_data")) << chorus_last_error();
}

}  // namespace
