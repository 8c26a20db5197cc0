// The C API (chorus.h) in a job of one rank: lifecycle, registration, every enqueue form with
// and without callbacks, poll/wait/release, allgather results, and an error text for every
// rejected call.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bindings/c/chorus.h"

namespace {

void clear_launcher_env() {
  for (const char* v :
       {"CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE", "CHORUS_RENDEZVOUS", "RANK",
        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    ::unsetenv(v);
}

bool has(const char* text, const std::string& part) {
  return text && std::string(text).find(part) != std::string::npos;
}

class c_api : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_launcher_env();
    ASSERT_EQ(chorus_init(), CHORUS_OK) << chorus_last_error();
  }
  void TearDown() override { chorus_shutdown(); }
};

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
  struct bad_case {
    std::function<int64_t()> call;
    std::vector<std::string> words;
  };
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
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i].call(), -1) << "case " << i;
    for (auto& w : cases[i].words)
      EXPECT_TRUE(has(chorus_last_error(), w)) << "case " << i << ": missing '" << w << "' in " << chorus_last_error();
  }
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

}  // namespace
