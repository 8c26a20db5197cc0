// The C API (chorus.h) in a job of one rank: lifecycle, registration, allreduce (one tensor and
// a batch), broadcast and allgather with and without callbacks, poll/wait/release (and a wait
// inside a completion callback), and an error text for every rejected call (reducescatter,
// alltoall and join, their result rows, splits and last rank: c_api_scatter_test.cpp; the
// timeline calls: c_api_timeline_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "bindings/cpp/api_checks.hpp"
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

TEST(c_api_lifecycle, before_init_everything_says_not_initialized) {
  clear_launcher_env();
  EXPECT_EQ(chorus_is_initialized(), 0);
  EXPECT_EQ(chorus_rank(), -1);
  EXPECT_EQ(chorus_size(), -1);
  int64_t id = chorus_register("early.grad");
  ASSERT_GE(id, 0) << chorus_last_error();
  float x = 1;
  int64_t shape[] = {1};
  EXPECT_EQ(chorus_enqueue_allreduce(id, &x, shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr), -1);
  EXPECT_TRUE(has(chorus_last_error(), "'early.grad'")) << chorus_last_error();
  EXPECT_TRUE(has(chorus_last_error(), "not initialized")) << chorus_last_error();
}

TEST(c_api_lifecycle, init_twice_and_shutdown_twice) {
  clear_launcher_env();
  ASSERT_EQ(chorus_init(), CHORUS_OK) << chorus_last_error();
  ASSERT_EQ(chorus_init(), CHORUS_OK) << chorus_last_error();
  EXPECT_EQ(chorus_is_initialized(), 1);
  EXPECT_EQ(chorus_rank(), 0);
  EXPECT_EQ(chorus_size(), 1);
  EXPECT_EQ(chorus_local_rank(), 0);
  EXPECT_EQ(chorus_local_size(), 1);
  chorus_shutdown();
  chorus_shutdown();
  EXPECT_EQ(chorus_is_initialized(), 0);
}

TEST(c_api_lifecycle, register_is_idempotent_and_rejects_empty_names) {
  int64_t a = chorus_register("fc1.weight");
  int64_t b = chorus_register("fc1.bias");
  EXPECT_GE(a, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(chorus_register("fc1.weight"), a);
  EXPECT_EQ(chorus_register(""), -1);
  EXPECT_TRUE(has(chorus_last_error(), "empty tensor name")) << chorus_last_error();
  EXPECT_EQ(chorus_register(nullptr), -1);
  EXPECT_TRUE(has(chorus_last_error(), "NULL")) << chorus_last_error();
}

TEST(c_api_lifecycle, a_name_is_registered_transient_or_not_never_both) {
  int64_t once = chorus_register_transient("loss.step0");
  EXPECT_GE(once, 0) << chorus_last_error();
  EXPECT_EQ(chorus_register_transient("loss.step0"), once);
  EXPECT_EQ(chorus_register("loss.step0"), -1);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_register('loss.step0'): already registered with "
                                       "chorus_register_transient"))
      << chorus_last_error();
  int64_t named = chorus_register("fc2.weight");
  ASSERT_GE(named, 0);
  EXPECT_EQ(chorus_register_transient("fc2.weight"), -1);
  EXPECT_TRUE(has(chorus_last_error(), "already registered with chorus_register;")) << chorus_last_error();
  EXPECT_EQ(chorus_register("fc2.weight"), named) << "the refusal changed nothing";
  EXPECT_EQ(chorus_register_transient(""), -1);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_register_transient: empty tensor name")) << chorus_last_error();
  EXPECT_EQ(chorus_register_transient(nullptr), -1);
}

TEST_F(c_api, transient_names_used_once_each_complete_exactly) {
  for (int step = 0; step < 50; ++step) {
    int64_t id = chorus_register_transient(("metric.once." + std::to_string(step)).c_str());
    ASSERT_GE(id, 0) << chorus_last_error();
    double v = step + 0.5;
    int64_t h = chorus_enqueue_allreduce(id, &v, nullptr, 0, CHORUS_FLOAT64, CHORUS_OP_SUM, nullptr, nullptr);
    ASSERT_GE(h, 0) << chorus_last_error();
    ASSERT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
    EXPECT_EQ(v, step + 0.5);
    chorus_release(h);
  }
}

TEST(c_api_lifecycle, status_names) {
  EXPECT_STREQ(chorus_status_name(CHORUS_OK), "ok");
  EXPECT_STREQ(chorus_status_name(CHORUS_ERR_CONNECTION_LOST), "connection_lost");
  EXPECT_STREQ(chorus_status_name(CHORUS_ERR_MISMATCH), "mismatch");
  EXPECT_STREQ(chorus_status_name(99), "unknown");
}

TEST_F(c_api, allreduce_with_wait_returns_the_input_of_one_rank) {
  int64_t id = chorus_register("conv1.weight.grad");
  std::vector<double> g = {1.5, -2.25, 3.0, 0.125, 7, 8};
  auto expect = g;
  int64_t shape[] = {2, 3};
  int64_t h = chorus_enqueue_allreduce(id, g.data(), shape, 2, CHORUS_FLOAT64, CHORUS_OP_AVERAGE, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  EXPECT_EQ(chorus_poll(h), 1);
  EXPECT_STREQ(chorus_error_string(h), "");
  EXPECT_EQ(g, expect);
  EXPECT_EQ(chorus_gathered_bytes(h), -1);  // not an allgather
  chorus_release(h);
  EXPECT_EQ(chorus_poll(h), -1);
  EXPECT_TRUE(has(chorus_last_error(), "handle " + std::to_string(h))) << chorus_last_error();
  EXPECT_EQ(chorus_wait(h, 0), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(chorus_error_string(h), "unknown")) << chorus_error_string(h);
  chorus_release(h);  // releasing twice does nothing
}

TEST_F(c_api, callbacks_run_once_with_the_handle_and_user_data) {
  int64_t id = chorus_register("cb.grad");
  int32_t v[3] = {1, 2, 3};
  int64_t shape[] = {3};
  callback_log log;
  int64_t h = chorus_enqueue_allreduce(id, v, shape, 1, CHORUS_INT32, CHORUS_OP_SUM, record, &log);
  ASSERT_GE(h, 0) << chorus_last_error();
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (log.calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  chorus_shutdown();
  EXPECT_EQ(log.calls.load(), 1);
  EXPECT_EQ(log.status.load(), CHORUS_OK);
  EXPECT_EQ(log.handle.load(), h);
  EXPECT_EQ(log.error, "");
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[2], 3);
}

TEST_F(c_api, batch_gives_a_handle_per_element_and_refuses_bad_ones_alone) {
  const int64_t ids[4] = {chorus_register("batch.w"), 12345, chorus_register("batch.b"), chorus_register("batch.x")};
  float w[4] = {1, 2, 3, 4};
  int64_t b = 7;
  void* data[4] = {w, w, &b, nullptr};  // element 3: NULL data
  const int64_t w_shape[] = {2, 2}, one[] = {1};
  const int64_t* shapes[4] = {w_shape, w_shape, nullptr, one};
  const int ndims[4] = {2, 2, 0, 1};
  const chorus_dtype dtypes[4] = {CHORUS_FLOAT32, CHORUS_FLOAT32, CHORUS_INT64, CHORUS_FLOAT32};
  int64_t handles[4];
  EXPECT_EQ(chorus_enqueue_allreduce_batch(4, ids, data, shapes, ndims, dtypes, CHORUS_OP_SUM, handles, nullptr, nullptr),
            3);
  EXPECT_EQ(handles[1], -1);  // unknown id: no handle, as chorus_enqueue_allreduce would say
  EXPECT_TRUE(has(chorus_last_error(), "chorus_enqueue_allreduce_batch: tensor id 12345 is not registered"))
      << chorus_last_error();
  ASSERT_GE(handles[0], 0);
  ASSERT_GE(handles[2], 0);
  ASSERT_GE(handles[3], 0);
  EXPECT_EQ(chorus_wait(handles[0], 10000), CHORUS_OK) << chorus_error_string(handles[0]);
  EXPECT_EQ(chorus_wait(handles[2], 10000), CHORUS_OK) << chorus_error_string(handles[2]);
  EXPECT_EQ(w[3], 4);  // one rank: the sum is the input
  EXPECT_EQ(b, 7);
  // NULL data: refused by the runtime, so its handle has already ended with the reason.
  EXPECT_EQ(chorus_wait(handles[3], 0), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(chorus_error_string(handles[3]), "batch.x")) << chorus_error_string(handles[3]);
  for (int i : {0, 2, 3}) chorus_release(handles[i]);
  EXPECT_EQ(chorus_enqueue_allreduce_batch(-1, nullptr, nullptr, nullptr, nullptr, nullptr, CHORUS_OP_SUM, nullptr,
                                           nullptr, nullptr),
            -1);
  EXPECT_TRUE(has(chorus_last_error(), "count -1 is negative")) << chorus_last_error();
  EXPECT_EQ(chorus_enqueue_allreduce_batch(1, ids, nullptr, shapes, ndims, dtypes, CHORUS_OP_SUM, handles, nullptr,
                                           nullptr),
            -1);
  EXPECT_TRUE(has(chorus_last_error(), "must not be NULL")) << chorus_last_error();
  EXPECT_EQ(chorus_enqueue_allreduce_batch(0, nullptr, nullptr, nullptr, nullptr, nullptr, CHORUS_OP_SUM, nullptr,
                                           nullptr, nullptr),
            0);
  // The callback runs for an element the runtime refused, too.
  callback_log log;
  EXPECT_EQ(chorus_enqueue_allreduce_batch(1, &ids[3], &data[3], &shapes[3], &ndims[3], &dtypes[3], CHORUS_OP_SUM,
                                           handles, record, &log),
            1);
  EXPECT_EQ(log.calls.load(), 1);
  EXPECT_EQ(log.status.load(), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(log.handle.load(), handles[0]);
  EXPECT_NE(log.error.find("batch.x"), std::string::npos) << log.error;
}

TEST_F(c_api, broadcast_and_allgather) {
  int64_t shape[] = {2, 2};
  uint8_t b[4] = {9, 8, 7, 6};
  int64_t hb = chorus_enqueue_broadcast(chorus_register("bcast"), b, shape, 2, CHORUS_UINT8, 0, nullptr, nullptr);
  ASSERT_GE(hb, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(hb, -1), CHORUS_OK) << chorus_error_string(hb);
  EXPECT_EQ(b[0], 9);
  chorus_release(hb);

  float rows[6] = {1, 2, 3, 4, 5, 6};
  int64_t gshape[] = {3, 2};
  int64_t hg = chorus_enqueue_allgather(chorus_register("gather"), rows, gshape, 2, CHORUS_FLOAT32, nullptr, nullptr);
  ASSERT_GE(hg, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(hg, 10000), CHORUS_OK) << chorus_error_string(hg);
  ASSERT_EQ(chorus_gathered_bytes(hg), 24);
  const float* out = static_cast<const float*>(chorus_gathered_data(hg));
  ASSERT_NE(out, nullptr);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], rows[i]);
  int64_t dims[4] = {};
  EXPECT_EQ(chorus_gathered_shape(hg, dims, 4), 2);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[1], 2);
  chorus_release(hg);
}

TEST_F(c_api, every_rejected_enqueue_returns_minus_one_with_a_text_and_no_callback) {
  int64_t id = chorus_register("bad.grad");
  float x[4] = {};
  int64_t shape[] = {2, 2};
  int64_t neg[] = {2, -3};
  callback_log log;
  std::vector<bad_case> cases = {
      {[&] { return chorus_enqueue_allreduce(12345, x, shape, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"tensor id 12345", "chorus_register"}},
      {[&] {
         return chorus_enqueue_allreduce(id, x, shape, 2, static_cast<chorus_dtype>(42), CHORUS_OP_SUM, record, &log);
       },
       {"'bad.grad'", "dtype 42"}},
      {[&] {
         return chorus_enqueue_allreduce(id, x, shape, 2, CHORUS_FLOAT32, static_cast<chorus_op>(-1), record, &log);
       },
       {"'bad.grad'", "op -1"}},
      {[&] { return chorus_enqueue_allreduce(id, x, nullptr, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"shape is NULL"}},
      {[&] { return chorus_enqueue_allreduce(id, x, shape, -1, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"ndim -1"}},
      {[&] { return chorus_enqueue_allreduce(id, nullptr, shape, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"allreduce('bad.grad')", "data is null", "[2,2]"}},
      {[&] { return chorus_enqueue_allreduce(id, x, neg, 2, CHORUS_FLOAT32, CHORUS_OP_SUM, record, &log); },
       {"[2,-3]", "negative"}},
      {[&] { return chorus_enqueue_broadcast(id, x, shape, 2, CHORUS_FLOAT32, 3, record, &log); },
       {"broadcast('bad.grad')", "root 3", "size 1"}},
      {[&] { return chorus_enqueue_allgather(id, x, nullptr, 0, CHORUS_FLOAT32, record, &log); },
       {"allgather('bad.grad')", "scalar"}},
  };
  expect_each_rejected(cases);
  EXPECT_EQ(log.calls.load(), 0) << "a rejected call must not call back";
}

TEST_F(c_api, enqueue_after_shutdown_says_so) {
  chorus_shutdown();
  float x = 0;
  EXPECT_EQ(chorus_enqueue_allreduce(chorus_register("late"), &x, nullptr, 0, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr,
                                     nullptr),
            -1);
  EXPECT_TRUE(has(chorus_last_error(), "shut down")) << chorus_last_error();
}

TEST_F(c_api, last_error_is_per_thread) {
  EXPECT_EQ(chorus_register(""), -1);
  std::string other;
  std::thread([&] { other = chorus_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_TRUE(has(chorus_last_error(), "empty")) << chorus_last_error();
}

// In a job of three ranks, splits whose sum wraps around to dim 0 passed the check before.
TEST(c_api_lifecycle, alltoall_splits_that_overflow_their_sum_are_rejected_naming_the_split) {
  chorus::tensor_spec s;
  s.name = "a2a.wrap";
  s.kind = chorus::collective_kind::alltoall;
  s.shape = {3, 2};
  auto st = chorus::detail::check_splits(s, {INT64_MAX, INT64_MAX, 5}, 3);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("alltoall('a2a.wrap')"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("split 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("overflow"), std::string::npos) << st.message();
  st = chorus::detail::check_splits(s, {1, INT64_MIN, 4}, 3);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("split 1 is negative"), std::string::npos) << st.message();
  EXPECT_TRUE(chorus::detail::check_splits(s, {1, 0, 2}, 3).ok());
}

struct wait_in_callback {
  std::atomic<int> calls{0};
  std::atomic<int> wait_code{-1}, poll_code{-1};
  std::string wait_error;
  int64_t other = -1;
};

// The callback runs on the runtime's worker: a blocking wait there could never end.
TEST_F(c_api, wait_inside_a_completion_callback_is_refused_at_once) {
  float a = 1, b = 2;
  int64_t shape[] = {1};
  wait_in_callback log;
  log.other = chorus_enqueue_allreduce(chorus_register("wait.other"), &b, shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM,
                                       nullptr, nullptr);
  ASSERT_GE(log.other, 0) << chorus_last_error();
  auto cb = [](int64_t self, int, const char*, void* user) {
    auto* l = static_cast<wait_in_callback*>(user);
    auto t0 = std::chrono::steady_clock::now();
    l->wait_code = chorus_wait(l->other, 5000);
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(1)) l->wait_code = -2;  // it blocked
    l->wait_error = chorus_last_error();
    l->poll_code = chorus_wait(self, 0);  // a poll cannot block: allowed
    ++l->calls;
  };
  int64_t h = chorus_enqueue_allreduce(chorus_register("wait.cb"), &a, shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, cb,
                                       &log);
  ASSERT_GE(h, 0) << chorus_last_error();
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (log.calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(log.calls.load(), 1);
  EXPECT_EQ(log.wait_code.load(), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(log.wait_error.find("chorus_wait(allreduce('wait.other'))"), std::string::npos) << log.wait_error;
  EXPECT_NE(log.wait_error.find("completion callback"), std::string::npos) << log.wait_error;
  EXPECT_EQ(log.poll_code.load(), CHORUS_OK);
  EXPECT_EQ(chorus_wait(log.other, 10000), CHORUS_OK) << chorus_error_string(log.other);  // outside: fine
  chorus_release(log.other);
  chorus_release(h);
}

}  // namespace
