// The C++ embedding API in a job of one rank (no launcher variables): init/shutdown lifecycle,
// results of one-rank collectives, boundary validation with errors naming the tensor, handle
// waits with a timeout, and callbacks that run exactly once.
#include "tests/support/one_rank_api.hpp"
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "chorus/chorus.hpp"
#include "bindings/cpp/op_state.hpp"

namespace chorus {
namespace {

using testing::clear_launcher_env;
using testing::mentions;
using api = testing::one_rank_api;

TEST(api_lifecycle, not_initialized_rejects_and_reports_minus_one) {
  clear_launcher_env();
  EXPECT_FALSE(is_initialized());
  EXPECT_EQ(rank(), -1);
  EXPECT_EQ(size(), -1);
  float x = 1;
  auto h = allreduce_async("grad.w", {&x, dtype::f32, {1}});
  ASSERT_TRUE(h.poll());
  EXPECT_EQ(h.result().code(), errc::invalid_argument);
  EXPECT_TRUE(mentions(h.result(), "allreduce('grad.w')")) << h.result().to_string();
  EXPECT_TRUE(mentions(h.result(), "not initialized")) << h.result().to_string();
}

TEST(api_lifecycle, init_is_idempotent_and_shutdown_then_init_again_works) {
  clear_launcher_env();
  ASSERT_TRUE(init().ok());
  ASSERT_TRUE(init().ok());
  EXPECT_TRUE(is_initialized());
  shutdown();
  shutdown();
  EXPECT_FALSE(is_initialized());
  float x = 2;
  auto h = allreduce_async("after", {&x, dtype::f32, {1}});
  EXPECT_EQ(h.wait(std::chrono::seconds(5)).code(), errc::shutdown) << h.result().to_string();
  ASSERT_TRUE(init().ok());
  auto again = allreduce_async("after", {&x, dtype::f32, {1}}, reduce_op::sum);
  EXPECT_TRUE(again.wait(std::chrono::seconds(10)).ok()) << again.result().to_string();
  EXPECT_EQ(x, 2.0f);
  shutdown();
}

TEST(api_lifecycle, concurrent_init_from_many_threads) {
  clear_launcher_env();
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) ts.emplace_back([&] { ok += init().ok(); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(size(), 1);
  shutdown();
}

TEST_F(api, no_environment_is_a_job_of_one_rank) {
  EXPECT_TRUE(is_initialized());
  EXPECT_EQ(rank(), 0);
  EXPECT_EQ(size(), 1);
  EXPECT_EQ(local_rank(), 0);
  EXPECT_EQ(local_size(), 1);
}

TEST_F(api, allreduce_of_one_rank_returns_the_input_for_every_op_and_dtype) {
  for (auto op : {reduce_op::sum, reduce_op::average, reduce_op::min, reduce_op::max, reduce_op::product}) {
    std::vector<float> f(1000);
    std::iota(f.begin(), f.end(), -3.25f);
    auto expect_f = f;
    auto h = allreduce_async("f32." + std::string(name_of(op)), {f.data(), dtype::f32, {10, 100}}, op);
    ASSERT_TRUE(h.wait(std::chrono::seconds(10)).ok()) << h.result().to_string();
    EXPECT_EQ(f, expect_f) << name_of(op);

    std::vector<int64_t> i(77);
    std::iota(i.begin(), i.end(), -5);
    auto expect_i = i;
    auto hi = allreduce_async("i64." + std::string(name_of(op)), {i.data(), dtype::i64, {77}}, op);
    ASSERT_TRUE(hi.wait(std::chrono::seconds(10)).ok()) << hi.result().to_string();
    EXPECT_EQ(i, expect_i) << name_of(op);
  }
}

TEST_F(api, average_of_one_rank_is_the_value_itself) {
  double d = 0.1;
  auto h = allreduce_async("scalar", {&d, dtype::f64, {}});  // default op: average
  ASSERT_TRUE(h.wait(std::chrono::seconds(10)).ok()) << h.result().to_string();
  EXPECT_EQ(d, 0.1);
  EXPECT_EQ(h.name(), "scalar");
}

TEST_F(api, allreduces_submitted_together_end_one_by_one) {
  std::vector<float> w{1, 2, 3}, b{4};
  std::vector<double> d{5};
  auto hs = allreduce_async(std::vector<op_name>{"together.w", "together.b", "together.d", ""},
                            {{w.data(), dtype::f32, {3}}, {b.data(), dtype::f32, {1}}, {d.data(), dtype::f64, {1}},
                             {b.data(), dtype::f32, {1}}},
                            reduce_op::sum);
  ASSERT_EQ(hs.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(hs[i].wait(std::chrono::seconds(10)).ok()) << hs[i].result().to_string();
  EXPECT_EQ(w, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(d[0], 5.0);
  ASSERT_TRUE(hs[3].poll());  // the empty name alone is refused, at the call
  EXPECT_EQ(hs[3].result().code(), errc::invalid_argument);

  auto odd = allreduce_async(std::vector<op_name>{"odd.a", "odd.b"}, {{w.data(), dtype::f32, {3}}});
  ASSERT_EQ(odd.size(), 2u);
  for (auto& h : odd) {
    ASSERT_TRUE(h.poll());
    EXPECT_EQ(h.result().code(), errc::invalid_argument);
    EXPECT_TRUE(mentions(h.result(), "2 names for 1 tensors")) << h.result().to_string();
  }
}

TEST_F(api, broadcast_from_root_0_and_allgather_of_one_rank) {
  std::vector<int32_t> b = {4, 5, 6};
  auto hb = broadcast_async("b", {b.data(), dtype::i32, {3}}, 0);
  ASSERT_TRUE(hb.wait(std::chrono::seconds(10)).ok()) << hb.result().to_string();
  EXPECT_EQ(b, (std::vector<int32_t>{4, 5, 6}));

  std::vector<uint8_t> g = {1, 2, 3, 4, 5, 6};
  auto hg = allgather_async("g", {g.data(), dtype::u8, {3, 2}});
  ASSERT_TRUE(hg.wait(std::chrono::seconds(10)).ok()) << hg.result().to_string();
  ASSERT_EQ(hg.gathered().size(), 6u);
  for (std::size_t k = 0; k < 6; ++k) EXPECT_EQ(static_cast<uint8_t>(hg.gathered()[k]), g[k]);
  EXPECT_EQ(hg.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(hg.first_dims(), (std::vector<int64_t>{3}));
}

TEST_F(api, empty_tensors_need_no_data) {
  auto h = allreduce_async("empty", {nullptr, dtype::f32, {0, 8}}, reduce_op::sum);
  EXPECT_TRUE(h.wait(std::chrono::seconds(10)).ok()) << h.result().to_string();
}

TEST_F(api, callback_forms_run_exactly_once) {
  std::atomic<int> calls{0};
  std::atomic<bool> ok{false};
  float x = 3;
  allreduce_async("cb", {&x, dtype::f32, {1}}, reduce_op::sum, [&](const status& st) {
    ok = st.ok();
    ++calls;
  });
  std::vector<int64_t> rows = {7, 8};
  std::atomic<int> gcalls{0};
  std::vector<int64_t> gshape;
  allgather_async("cbg", {rows.data(), dtype::i64, {2}},
                  [&](const status& st, const std::vector<std::byte>& g, const std::vector<int64_t>& shape) {
                    EXPECT_TRUE(st.ok()) << st.to_string();
                    EXPECT_EQ(g.size(), 16u);
                    gshape = shape;
                    ++gcalls;
                  });
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((calls == 0 || gcalls == 0) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  shutdown();  // nothing may call back twice, not even the shutdown sweep
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(ok.load());
  EXPECT_EQ(gcalls.load(), 1);
  EXPECT_EQ(gshape, (std::vector<int64_t>{2}));
}

TEST_F(api, rejected_arguments_name_the_tensor_and_the_value) {
  float x[4] = {};
  struct bad_case {
    handle h;
    errc code;
    std::vector<std::string> words;
  };
  std::vector<bad_case> cases;
  cases.push_back({allreduce_async("", {x, dtype::f32, {4}}), errc::invalid_argument, {"empty tensor name"}});
  cases.push_back({allreduce_async("w.null", {nullptr, dtype::f32, {2, 2}}),
                   errc::invalid_argument,
                   {"allreduce('w.null')", "data is null", "[2,2]", "4 elements"}});
  cases.push_back({allreduce_async("w.neg", {x, dtype::f32, {2, -1}}),
                   errc::invalid_argument,
                   {"allreduce('w.neg')", "[2,-1]", "negative"}});
  cases.push_back({broadcast_async("w.root", {x, dtype::f32, {4}}, 1),
                   errc::invalid_argument,
                   {"broadcast('w.root')", "root 1", "size 1"}});
  cases.push_back({broadcast_async("w.root2", {x, dtype::f32, {4}}, -1),
                   errc::invalid_argument,
                   {"broadcast('w.root2')", "root -1"}});
  cases.push_back(
      {allgather_async("w.scalar", {x, dtype::f32, {}}), errc::invalid_argument, {"allgather('w.scalar')", "scalar"}});
  cases.push_back({allreduce_async("w.dtype", {x, static_cast<dtype>(42), {4}}),
                   errc::invalid_argument,
                   {"allreduce('w.dtype')", "dtype 42"}});
  cases.push_back({allreduce_async("w.op", {x, dtype::f32, {4}}, static_cast<reduce_op>(9)),
                   errc::invalid_argument,
                   {"allreduce('w.op')", "reduce op 9"}});
  cases.push_back({allreduce_async("w.cuda", {x, dtype::f32, {4}, device_kind::cuda}),
                   errc::invalid_argument,
                   {"allreduce('w.cuda')", "device cuda"}});
  for (auto& c : cases) {
    ASSERT_TRUE(c.h.poll()) << c.h.name();
    EXPECT_EQ(c.h.result().code(), c.code) << c.h.result().to_string();
    for (auto& w : c.words)
      EXPECT_TRUE(mentions(c.h.result(), w)) << "missing '" << w << "' in " << c.h.result().to_string();
  }
}

TEST_F(api, rejected_arguments_call_the_callback_once_on_the_calling_thread) {
  int calls = 0;
  errc code = errc::ok;
  auto caller = std::this_thread::get_id();
  broadcast_async("bad.root", {nullptr, dtype::f32, {0}}, 5, [&](const status& st) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    code = st.code();
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(code, errc::invalid_argument);
}

TEST(api_handle, wait_times_out_while_pending_and_the_operation_continues) {
  tensor_spec spec;
  spec.name = "slow.grad";
  auto state = std::make_shared<detail::op_state>(spec, nullptr);
  handle h(state);
  handle copy = h;
  EXPECT_FALSE(h.poll());
  EXPECT_EQ(h.result().code(), errc::timeout);
  auto st = h.wait(std::chrono::milliseconds(30));
  EXPECT_EQ(st.code(), errc::timeout);
  EXPECT_TRUE(mentions(st, "allreduce('slow.grad')")) << st.to_string();
  EXPECT_TRUE(mentions(st, "continues")) << st.to_string();
  EXPECT_EQ(h.wait(std::chrono::milliseconds(-5)).code(), errc::timeout);
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    state->complete({});
  });
  EXPECT_TRUE(copy.wait().ok());
  finisher.join();
  EXPECT_TRUE(h.poll());
  EXPECT_FALSE(state->complete({errc::internal, "second"}));
  EXPECT_TRUE(h.result().ok());
}

TEST(api_handle, empty_handle_is_done_with_an_error) {
  handle h;
  EXPECT_TRUE(h.poll());
  EXPECT_EQ(h.wait().code(), errc::invalid_argument);
  EXPECT_TRUE(h.gathered().empty());
}

TEST_F(api, init_and_shutdown_from_a_callback_are_refused_without_deadlock) {
  std::atomic<int> calls{0};
  std::atomic<errc> init_code{errc::ok};
  float x = 1;
  allreduce_async("cb.init", {&x, dtype::f32, {1}}, reduce_op::sum, [&](const status&) {
    init_code = init().code();
    shutdown();  // ignored (logged)
    ++calls;
  });
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(init_code.load(), errc::invalid_argument);
  EXPECT_TRUE(is_initialized());
}

TEST_F(api, a_blocking_wait_inside_a_callback_is_refused_and_a_poll_is_not) {
  std::atomic<int> calls{0};
  std::atomic<errc> wait_code{errc::ok}, poll_code{errc::internal};
  std::string message;
  float x = 1, y = 2;
  handle other = allreduce_async("wait.other", {&y, dtype::f32, {1}}, reduce_op::sum);
  allreduce_async("wait.cb", {&x, dtype::f32, {1}}, reduce_op::sum, [&](const status&) {
    auto st = other.wait(std::chrono::milliseconds(5000));
    wait_code = st.code();
    message = st.message();
    auto polled = other.wait(std::chrono::milliseconds(-1));
    poll_code = polled.code() == errc::timeout ? errc::ok : polled.code();  // pending or done: not refused
    ++calls;
  });
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(calls.load(), 1);
  EXPECT_EQ(wait_code.load(), errc::invalid_argument);
  EXPECT_NE(message.find("chorus::handle::wait(allreduce('wait.other'))"), std::string::npos) << message;
  EXPECT_EQ(poll_code.load(), errc::ok);
  EXPECT_TRUE(other.wait(std::chrono::seconds(10)).ok());
}

}  // namespace
}  // namespace chorus
