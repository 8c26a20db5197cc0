// The C API (chorus.h) in a job of one rank: lifecycle, registration, every enqueue form with
// and without callbacks (reducescatter, alltoall and join included), poll/wait/release, result
// rows, splits and last rank, and an error text for every rejected call (the timeline calls:
// c_api_timeline_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "bindings/cpp/api_checks.hpp"
#include "tests/support/c_api_fixture.hpp"
#include "tests/support/one_rank_api.hpp"

namespace {

using chorus::testing::c_api;
using chorus::testing::clear_launcher_env;
using chorus::testing::has;

struct callback_log {
  std::atomic<int> calls{0};
  std::atomic<int> status{-1};
  std::atomic<int64_t> handle{-2};
  std::string error;
};

void record(int64_t handle, int status, const char* error, void* user) {
  auto* log = static_cast<callback_log*>(user);
  log->handle = handle;
  log->status = status;
  log->error = error ? error : "";
  chorus_release(handle);  // allowed inside the callback
  ++log->calls;
}

/// An enqueue call that must be rejected, and the words its error text must contain.
struct bad_case {
  std::function<int64_t()> call;
  std::vector<std::string> words;
};

/// Each call returns -1 and sets chorus_last_error() to a text with all its words.
void expect_each_rejected(const std::vector<bad_case>& cases) {
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i].call(), -1) << "case " << i;
    for (auto& w : cases[i].words)
      EXPECT_TRUE(has(chorus_last_error(), w)) << "case " << i << ": missing '" << w << "' in " << chorus_last_error();
  }
}

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
