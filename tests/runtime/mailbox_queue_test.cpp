// The pipeline's direct path (runtime/collectives/mailbox_queue.hpp), ranks in threads of one
// process over real shared-memory mailboxes: chunks that each rank's senders start in another
// order still run in the order they were handed out, with exact results; a chunk started but
// never handed out fails at once; an interrupt ends the running chunk and every later one with
// its cause; stop() ends the chunks waiting for their turn and joins; chunks handed out and never
// started leave the order when a pipeline shuts down; ranks whose orders differ get a protocol
// error naming both chunks, and the queue reports it; completions of chunks run back to back are
// told together, never held for a chunk not started.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/collectives/mailbox_queue.hpp"
#include "tests/runtime/mailbox_ranks.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

struct outcome {
  std::promise<status> promise;
  std::future<status> future = promise.get_future();
  mailbox_queue::callback done() {
    return [this](const status& st) { promise.set_value(st); };
  }
};

std::vector<std::unique_ptr<mailbox_queue>> make_queues(int n, std::vector<status>* reported = nullptr,
                                                       std::mutex* mu = nullptr) {
  std::vector<std::unique_ptr<mailbox_queue>> out;
  for (auto& lane : make_ranks(n))
    out.push_back(std::make_unique<mailbox_queue>(std::move(lane), [reported, mu](const status& st) {
      if (!reported) return;
      std::lock_guard lk(*mu);
      reported->push_back(st);
    }));
  return out;
}

TEST(mailbox_queue, chunks_started_out_of_order_run_in_hand_out_order_with_exact_sums) {
  auto q = make_queues(2);
  // Three chunks of different sizes (a wrong order would be a protocol error) and values.
  const std::vector<std::size_t> counts{1000, 70000, 5};
  std::vector<std::vector<std::vector<float>>> bufs(2);  // [rank][chunk]
  for (int r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < counts.size(); ++c)
      bufs[r].push_back(std::vector<float>(counts[c], static_cast<float>(r + 1 + 10 * c)));
  for (int r = 0; r < 2; ++r)
    for (uint64_t s : {11, 12, 13}) q[r]->expect(s);
  std::vector<std::vector<outcome>> done(2);
  for (auto& d : done) d = std::vector<outcome>(3);
  auto start = [&](int r, std::size_t c) {
    q[r]->start(11 + c, bufs[r][c].data(), counts[c], dtype::f32, reduce_op::sum, done[r][c].done());
  };
  // Rank 0 starts them last to first, rank 1 middle, last, first.
  for (std::size_t c : {2, 1, 0}) start(0, c);
  for (std::size_t c : {1, 2, 0}) start(1, c);
  for (int r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < 3; ++c) {
      ASSERT_EQ(done[r][c].future.wait_for(10s), std::future_status::ready) << "rank " << r << " chunk " << c;
      auto st = done[r][c].future.get();
      ASSERT_TRUE(st.ok()) << st.to_string();
      const float want = static_cast<float>(1 + 10 * c) + static_cast<float>(2 + 10 * c);
      for (float v : bufs[r][c]) ASSERT_EQ(v, want) << "rank " << r << " chunk " << c;
    }
  EXPECT_EQ(q[0]->ran(), 3u);
  EXPECT_EQ(q[1]->ran(), 3u);
  // Each rank posted every chunk whole to its one peer (the metrics' mailbox bytes).
  for (int r = 0; r < 2; ++r) EXPECT_EQ(q[r]->sent_bytes(), (1000u + 70000u + 5u) * sizeof(float)) << "rank " << r;
}

TEST(mailbox_queue, a_chunk_started_without_being_handed_out_fails_at_once) {
  auto q = make_queues(2);
  float x = 1;
  outcome o;
  q[0]->start(5, &x, 1, dtype::f32, reduce_op::sum, o.done());
  ASSERT_EQ(o.future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(o.future.get().to_string(),
            "internal: chunk 5 started on the direct path without being handed out to it (or twice)");
}

TEST(mailbox_queue, an_interrupt_ends_the_running_chunk_and_every_later_one_with_its_cause) {
  auto q = make_queues(2);
  std::vector<float> a(100, 1.0f), b(100, 1.0f);
  q[0]->expect(1);
  q[0]->expect(2);
  outcome first, second;
  q[0]->start(1, a.data(), a.size(), dtype::f32, reduce_op::sum, first.done());  // rank 1 never posts
  q[0]->start(2, b.data(), b.size(), dtype::f32, reduce_op::sum, second.done());
  EXPECT_EQ(first.future.wait_for(200ms), std::future_status::timeout);  // still waiting for rank 1
  q[0]->interrupt(status{errc::connection_lost, "rank 1 died"});
  ASSERT_EQ(first.future.wait_for(5s), std::future_status::ready);
  ASSERT_EQ(second.future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(first.future.get().to_string(), "connection_lost: rank 1 died");
  EXPECT_EQ(second.future.get().to_string(), "connection_lost: rank 1 died");
}

TEST(mailbox_queue, stop_ends_every_chunk_waiting_for_its_turn_and_joins) {
  auto q = make_queues(2);
  std::vector<float> a(10, 1.0f), b(10, 1.0f);
  q[0]->expect(1);
  q[0]->expect(2);
  outcome first, second, late;
  q[0]->start(1, a.data(), a.size(), dtype::f32, reduce_op::sum, first.done());
  q[0]->start(2, b.data(), b.size(), dtype::f32, reduce_op::sum, second.done());
  q[0]->stop(status{errc::shutdown, "rank 0 shut down"});
  // Both ended before stop() returned.
  ASSERT_EQ(first.future.wait_for(0s), std::future_status::ready);
  ASSERT_EQ(second.future.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(first.future.get().to_string(), "shutdown: rank 0 shut down");
  EXPECT_EQ(second.future.get().to_string(), "shutdown: rank 0 shut down");
  q[0]->start(3, a.data(), a.size(), dtype::f32, reduce_op::sum, late.done());
  ASSERT_EQ(late.future.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(late.future.get().to_string(), "shutdown: rank 0 shut down");
  q[0]->stop(status{errc::shutdown, "again"});  // idempotent
}

TEST(mailbox_queue, chunks_handed_out_and_never_started_leave_the_order_when_forgotten) {
  auto q = make_queues(2);
  std::vector<std::vector<float>> bufs{std::vector<float>(50, 1.0f), std::vector<float>(50, 2.0f)};
  // Rank 0's pipeline handed out 7 and 8 but shut down before starting 7; rank 1 only ever
  // had 8. Until forgotten, 8 waits behind 7 on rank 0.
  q[0]->expect(7);
  q[0]->expect(8);
  q[1]->expect(8);
  outcome mine, theirs;
  q[0]->start(8, bufs[0].data(), 50, dtype::f32, reduce_op::sum, mine.done());
  q[1]->start(8, bufs[1].data(), 50, dtype::f32, reduce_op::sum, theirs.done());
  EXPECT_EQ(mine.future.wait_for(200ms), std::future_status::timeout);
  q[0]->forget_unstarted();
  ASSERT_EQ(mine.future.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(theirs.future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(mine.future.get().ok());
  EXPECT_TRUE(theirs.future.get().ok());
  EXPECT_EQ(bufs[0], std::vector<float>(50, 3.0f));
  EXPECT_EQ(bufs[1], std::vector<float>(50, 3.0f));
}

TEST(mailbox_queue, ranks_whose_orders_differ_fail_naming_both_chunks_and_report_it) {
  std::vector<status> reported;
  std::mutex mu;
  auto q = make_queues(2, &reported, &mu);
  std::vector<float> a(10, 1.0f), b(10, 1.0f);
  q[0]->expect(1);
  q[1]->expect(2);
  outcome o0, o1;
  q[0]->start(1, a.data(), 10, dtype::f32, reduce_op::sum, o0.done());
  q[1]->start(2, b.data(), 10, dtype::f32, reduce_op::sum, o1.done());
  ASSERT_EQ(o0.future.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(o1.future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(o0.future.get().to_string(),
            "protocol: allreduce #1 of 40 bytes of f32 sum on rank 0, but rank 1 posted #2, 40 bytes of f32 sum: every "
            "rank must make the same collective calls in the same order");
  EXPECT_EQ(o1.future.get().code(), errc::protocol);
  std::lock_guard lk(mu);
  EXPECT_EQ(reported.size(), 2u);  // both ranks' queues told their communicators
}

// Completions (mailbox_queue.hpp): chunks that are ready back to back run before the earlier
// ones are told, each told exactly once and in order; one with nothing ready behind it is told
// at once, without waiting for a later chunk to start.
TEST(mailbox_queue, completions_wait_for_ready_chunks_behind_them_but_never_for_a_chunk_not_started) {
  auto q = make_queues(2);
  constexpr int chunks = 5;
  std::vector<std::vector<std::vector<float>>> bufs(2);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < chunks + 1; ++c) bufs[r].push_back(std::vector<float>(1000, static_cast<float>(r + c)));
  for (int r = 0; r < 2; ++r)
    for (uint64_t s = 1; s <= chunks + 1; ++s) q[r]->expect(s);
  std::mutex mu;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> told(2);  // [rank]: (chunk, chunks run by then)
  std::vector<std::promise<void>> last(2);
  auto start = [&](int r, uint64_t s) {
    q[r]->start(s, bufs[r][s - 1].data(), 1000, dtype::f32, reduce_op::sum, [&, r, s](const status& st) {
      EXPECT_TRUE(st.ok()) << st.to_string();
      std::lock_guard lk(mu);
      told[r].emplace_back(s, q[r]->ran());
      if (s == chunks) last[r].set_value();
    });
  };
  // 2..5 first: none can run before 1, so once 1 starts all five are ready back to back.
  for (int r = 0; r < 2; ++r) {
    for (uint64_t s = 2; s <= chunks; ++s) start(r, s);
    start(r, 1);
  }
  // Chunk 6 is handed out but not started: chunk 5's completion must not wait for it.
  for (auto& p : last) ASSERT_EQ(p.get_future().wait_for(10s), std::future_status::ready);
  std::lock_guard lk(mu);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(told[r].size(), static_cast<std::size_t>(chunks)) << "rank " << r;
    for (int c = 0; c < chunks; ++c) EXPECT_EQ(told[r][c].first, static_cast<uint64_t>(c + 1)) << "rank " << r;
    // The earliest a completion is told is after the next ready chunk ran.
    EXPECT_GE(told[r][0].second, 2u) << "rank " << r;
    EXPECT_EQ(told[r].back().second, static_cast<uint64_t>(chunks)) << "rank " << r;
    for (int c = 0; c < chunks; ++c) EXPECT_EQ(bufs[r][c], std::vector<float>(1000, static_cast<float>(1 + 2 * c)));
  }
}

// ... but never across a chunk larger than mailbox_queue::completion_hold_bytes: a small
// chunk's completion is told before such a chunk runs.
TEST(mailbox_queue, completions_are_told_before_a_large_chunk_runs) {
  auto q = make_queues(2);
  const std::size_t large = mailbox_queue::completion_hold_bytes / sizeof(float) + 1;
  std::vector<std::vector<float>> small(2, std::vector<float>(16, 1.0f)), big(2, std::vector<float>(large, 1.0f));
  std::vector<uint64_t> ran_when_told(2, 0);
  std::vector<outcome> big_done(2);
  std::vector<std::promise<void>> small_told(2);
  for (int r = 0; r < 2; ++r) {
    q[r]->expect(1);
    q[r]->expect(2);
    q[r]->start(2, big[r].data(), large, dtype::f32, reduce_op::sum, big_done[r].done());  // ready behind 1
    q[r]->start(1, small[r].data(), 16, dtype::f32, reduce_op::sum, [&, r](const status& st) {
      EXPECT_TRUE(st.ok()) << st.to_string();
      ran_when_told[r] = q[r]->ran();
      small_told[r].set_value();
    });
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(small_told[r].get_future().wait_for(10s), std::future_status::ready);
    ASSERT_EQ(big_done[r].future.wait_for(10s), std::future_status::ready);
    EXPECT_TRUE(big_done[r].future.get().ok());
    EXPECT_EQ(ran_when_told[r], 1u) << "rank " << r << ": the small chunk was told after the large one ran";
    EXPECT_EQ(big[r], std::vector<float>(large, 2.0f));
  }
}

}  // namespace
}  // namespace chorus
