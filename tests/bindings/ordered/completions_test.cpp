// The ordered groups' completion thread (bindings/ordered/completions.hpp): ends run there in
// order, a barrier's end waits for every earlier collective (not for point-to-point calls), a
// call pending too long is reported as stalled and then as timed out, once; after stop() ends run
// on the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "bindings/ordered/completions.hpp"

namespace chorus::ordered {
namespace {

using namespace std::chrono_literals;

struct recorder {
  std::mutex mu;
  std::vector<int> order;
  std::thread::id thread;
  void add(int v) {
    std::lock_guard lk(mu);
    order.push_back(v);
    thread = std::this_thread::get_id();
  }
  std::vector<int> seen() {
    std::lock_guard lk(mu);
    return order;
  }
};

std::string name(uint64_t seq) { return "call #" + std::to_string(seq); }

bool eventually(const std::function<bool()>& f, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return f();
}

TEST(completions, ends_run_on_the_thread_in_the_order_they_came) {
  recorder rec;
  completions c(10s, name, [](const status&) {});
  for (int i = 1; i <= 3; ++i) c.begin(i, 1);
  c.end(2, [&] { rec.add(2); });
  c.end(1, [&] { rec.add(1); });
  c.end(3, [&] { rec.add(3); });
  ASSERT_TRUE(eventually([&] { return rec.seen().size() == 3; }));
  EXPECT_EQ(rec.seen(), (std::vector<int>{2, 1, 3}));
  EXPECT_NE(rec.thread, std::this_thread::get_id());
}

TEST(completions, a_barrier_waits_for_earlier_collectives_but_not_point_to_point_calls) {
  recorder rec;
  completions c(10s, name, [](const status&) {});
  c.begin(1, 11);
  c.begin(2, 0);  // point-to-point: no spec
  c.begin(3, 12);
  c.end(3, [&] { rec.add(3); }, true);
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(rec.seen().empty()) << "the barrier ended before the all_reduce";
  c.end(1, [&] { rec.add(1); });
  ASSERT_TRUE(eventually([&] { return rec.seen().size() == 2; }));
  EXPECT_EQ(rec.seen(), (std::vector<int>{1, 3}));  // the recv (2) still pends
  c.ended_here(2);
}

TEST(completions, a_call_pending_too_long_is_reported_stalled_then_timed_out_once) {
  std::atomic<int> stalls{0}, timeouts{0};
  std::mutex mu;
  std::string why;
  completions c(
      300ms, name,
      [&](const status& st) {
        ++timeouts;
        std::lock_guard lk(mu);
        why = st.to_string();
      },
      100ms, [&](uint64_t seq, const std::string& name, uint64_t spec) {
        EXPECT_EQ(seq, 4u);
        EXPECT_EQ(name, "call #4");
        EXPECT_EQ(spec, 99u);
        ++stalls;
      });
  c.begin(4, 99);
  ASSERT_TRUE(eventually([&] { return timeouts.load() == 1; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(timeouts.load(), 1);
  EXPECT_GE(stalls.load(), 1);
  EXPECT_LE(stalls.load(), 3);
  std::lock_guard lk(mu);
  EXPECT_NE(why.find("call #4 did not end within the group's timeout of 300 ms"), std::string::npos) << why;
}

TEST(completions, an_end_that_waits_for_another_end_gets_another_runner) {
  // A callback that starts a call and waits for its end (DDP's PowerSGD hook does): the first
  // runner blocks in it, so the second end must run elsewhere.
  completions c(10s, name, [](const status&) {});
  std::mutex mu;
  std::condition_variable cv;
  bool inner_ended = false, outer_ended = false;
  c.begin(1, 1);
  c.begin(2, 1);
  c.end(1, [&] {
    std::unique_lock lk(mu);
    cv.wait_for(lk, 5s, [&] { return inner_ended; });
    outer_ended = inner_ended;
  });
  std::this_thread::sleep_for(completions::stuck_after + 20ms);
  c.end(2, [&] {
    std::lock_guard lk(mu);
    inner_ended = true;
    cv.notify_all();
  });
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lk(mu);
    return outer_ended;
  }));
  EXPECT_EQ(c.runners(), 2);
}

TEST(completions, after_stop_ends_run_on_the_caller_and_deferred_ones_run_at_stop) {
  recorder rec;
  auto c = std::make_unique<completions>(10s, name, [](const status&) {});
  c->begin(1, 1);
  c->begin(2, 2);
  c->end(2, [&] { rec.add(2); }, true);  // held for call 1, which never ends
  c->stop();
  EXPECT_EQ(rec.seen(), (std::vector<int>{2}));
  c->end(1, [&] { rec.add(1); });
  EXPECT_EQ(rec.seen(), (std::vector<int>{2, 1}));
  EXPECT_EQ(rec.thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace chorus::ordered
