// The gossip negotiator's cycle timing (runtime/negotiation/gossip.hpp): the cycle time as a
// lower bound on spacing, a bucket's worth of new bytes starting a cycle early, a rank that
// caught up starting at once (early_start), and a rank ahead holding its new tensors for the
// cycle its peer starts (hold_when_ahead). Negotiators driven directly with explicit times, or
// two wired by hand with every message delivered at once: no threads, no sleeps.
#include "runtime/negotiation/gossip.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "tests/support/negotiation_sim.hpp"

namespace chorus::negotiation {
namespace {

using namespace std::chrono_literals;
using chorus::testing::spec;

TEST(GossipNegotiator, TheCycleTimeIsALowerBoundOnSpacing) {
  negotiation_options nego;
  nego.cycle_time = 5ms;
  gossip_negotiator g(0, 1, nego);
  time_point t{};
  EXPECT_EQ(g.local_ready(spec("a", {1}), t).cycles.size(), 1u);
  auto b = g.local_ready(spec("b", {1}), t + 1ms);
  EXPECT_TRUE(b.cycles.empty());
  ASSERT_TRUE(b.wake_at);
  EXPECT_EQ(*b.wake_at, t + 5ms);
  EXPECT_TRUE(g.on_timer(t + 4ms).cycles.empty());
  EXPECT_EQ(g.on_timer(t + 5ms).cycles.size(), 1u);
}

TEST(GossipNegotiator, ABucketsWorthOfNewBytesStartsACycleWithoutWaitingOutTheCycleTime) {
  negotiation_options nego;
  nego.cycle_time = 5ms;
  nego.start_bytes = 400;  // 100 floats
  gossip_negotiator g(0, 1, nego);
  time_point t{};
  EXPECT_EQ(g.local_ready(spec("a", {1}), t).cycles.size(), 1u);  // idle: at once
  // 396 bytes new (first appearances, by name): they wait for the cycle time.
  EXPECT_TRUE(g.local_ready(spec("b", {60}), t + 1ms).cycles.empty());
  auto c = g.local_ready(spec("c", {39}), t + 1ms);
  EXPECT_TRUE(c.cycles.empty());
  ASSERT_TRUE(c.wake_at);
  EXPECT_EQ(*c.wake_at, t + 5ms);
  // Four more bytes: 400 wait, and the cycle starts now with all three.
  auto d = g.local_ready(spec("d", {1}), t + 2ms);
  ASSERT_EQ(d.cycles.size(), 1u);
  ASSERT_EQ(d.batches.size(), 1u);
  EXPECT_EQ(d.batches[0].ids.size(), 3u);
  // The count starts again after each contribution; registered names (sent as bits) count alike.
  EXPECT_TRUE(g.local_ready(spec("b", {60}), t + 3ms).cycles.empty());
  EXPECT_TRUE(g.local_ready(spec("c", {39}), t + 3ms).cycles.empty());
  EXPECT_EQ(g.local_ready(spec("a", {1}), t + 3ms).cycles.size(), 1u);
  // Off (0, as a fusion threshold of 0 sets it): even a large tensor waits out the cycle time.
  g.set_timing(nego.cycle_time, 0);
  EXPECT_TRUE(g.local_ready(spec("big", {1000}), t + 4ms).cycles.empty());
  EXPECT_TRUE(g.on_timer(t + 5ms).cycles.empty());
  // Switched on again, the next look at the ledger starts the cycle for what waits.
  g.set_timing(nego.cycle_time, 400);
  EXPECT_EQ(g.on_timer(t + 5ms + 1us).cycles.size(), 1u);
}

// Two gossip negotiators wired by hand: every message is delivered at once, in order.
struct hand_wired_pair {
  explicit hand_wired_pair(negotiation_options o) : ranks{gossip_negotiator(0, 2, o), gossip_negotiator(1, 2, o)} {}
  gossip_negotiator ranks[2];
  std::vector<uint32_t> agreed[2];  // ids, in agreed order
  int cycles[2] = {0, 0};

  /// Applies `a` (produced by rank `r` at `now`) and delivers what follows until quiet; returns
  /// the number of messages rank `r` sent in `a` itself.
  std::size_t pump(int r, actions a, time_point now) {
    std::size_t first = a.send.size();
    std::vector<std::pair<int, actions>> todo{{r, std::move(a)}};
    while (!todo.empty()) {
      auto [who, acts] = std::move(todo.back());
      todo.pop_back();
      cycles[who] += static_cast<int>(acts.cycles.size());
      for (auto& b : acts.batches) agreed[who].insert(agreed[who].end(), b.ids.begin(), b.ids.end());
      for (auto& m : acts.send) todo.push_back({m.to, ranks[m.to].on_message(m.message, now)});
    }
    return first;
  }
};

TEST(GossipNegotiator, ARankThatCaughtUpStartsAtOnceInsteadOfAfterTheCycleTime) {
  for (bool early : {true, false}) {
    SCOPED_TRACE(early ? "early_start" : "no early_start");
    negotiation_options o;
    o.cycle_time = 10ms;
    o.early_start = early;
    hand_wired_pair job(o);
    time_point t0{};
    auto x = spec("x", {4}), y = spec("y", {8});
    // The first cycles register x and y: both ranks have both before any message moves.
    actions first[2][2];
    for (int r : {0, 1}) {
      first[r][0] = job.ranks[r].local_ready(x, t0);
      first[r][1] = job.ranks[r].local_ready(y, t0);
    }
    for (int r : {0, 1})
      for (auto& a : first[r]) job.pump(r, std::move(a), t0);
    for (int r : {0, 1}) job.pump(r, job.ranks[r].on_timer(t0 + 10ms), t0 + 10ms);
    ASSERT_EQ(job.agreed[0].size(), 2u);
    ASSERT_EQ(job.agreed[1].size(), 2u);
    // Next cycle: rank 0 has x and y when its cycle time lets it start; rank 1 joins it with
    // nothing (its tensors are late).
    int joined = job.cycles[1];
    auto t1 = t0 + 20ms;
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t1 - 5ms), t1 - 5ms), 0u);
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(y, t1 - 5ms), t1 - 5ms), 0u);
    EXPECT_EQ(job.pump(0, job.ranks[0].on_timer(t1), t1), 1u);
    ASSERT_EQ(job.cycles[1], joined + 1);
    ASSERT_EQ(job.agreed[1].size(), 2u);
    // 100 µs later rank 1 has x, not yet y: rank 0 still waits for y, so no cycle starts.
    auto t2 = t1 + 100us;
    EXPECT_EQ(job.pump(1, job.ranks[1].local_ready(x, t2), t2), 0u);
    // Now y: rank 1 has caught up. Early: it starts cycle 3 at once and both agree x and y.
    // Without: it waits until its cycle time has passed since it joined cycle 2.
    auto t3 = t2 + 100us;
    auto a = job.ranks[1].local_ready(y, t3);
    ASSERT_TRUE(a.wake_at || !a.send.empty());
    if (!early) EXPECT_EQ(*a.wake_at, t1 + 10ms);
    EXPECT_EQ(job.pump(1, std::move(a), t3), early ? 1u : 0u);
    EXPECT_EQ(job.agreed[0].size(), early ? 4u : 2u);
    EXPECT_EQ(job.agreed[1].size(), early ? 4u : 2u);
    if (!early) {
      job.pump(1, job.ranks[1].on_timer(t1 + 10ms), t1 + 10ms);
      EXPECT_EQ(job.agreed[0].size(), 4u);
    }
    EXPECT_EQ(job.agreed[0], job.agreed[1]);
  }
}

// Registers x and y on both ranks of `job` (both have both before any message moves).
void register_both(hand_wired_pair& job, const tensor_spec& x, const tensor_spec& y, time_point t0,
                   duration cycle_time) {
  actions first[2];
  for (int r : {0, 1}) first[r] = job.ranks[r].local_ready_all({x, y}, t0);
  for (int r : {0, 1}) job.pump(r, std::move(first[r]), t0);
  for (int r : {0, 1}) job.pump(r, job.ranks[r].on_timer(t0 + cycle_time), t0 + cycle_time);
}

TEST(GossipNegotiator, ARankAheadHoldsBackABucketsWorthToo) {
  negotiation_options o;
  o.cycle_time = 10ms;
  o.hold_when_ahead = true;
  o.start_bytes = 400;
  hand_wired_pair job(o);
  auto x = spec("x", {4}), y = spec("y", {8}), big = spec("big", {1000});
  time_point t0{};
  register_both(job, x, y, t0, o.cycle_time);
  ASSERT_EQ(job.agreed[0].size(), 2u);
  // Rank 0 has x, rank 1 not yet: after this cycle rank 0 is ahead.
  auto t1 = t0 + 20ms;
  EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t1), t1), 1u);
  ASSERT_EQ(job.agreed[0].size(), 2u);
  // A bucket's worth on rank 0 starts nothing while it is ahead, at once or later.
  EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(big, t1 + 1ms), t1 + 1ms), 0u);
  EXPECT_EQ(job.pump(0, job.ranks[0].on_timer(t1 + 30ms), t1 + 30ms), 0u);
  // Rank 1 catches up with x and starts the cycle; rank 0 joins it with x and the big tensor.
  EXPECT_EQ(job.pump(1, job.ranks[1].local_ready(x, t1 + 31ms), t1 + 31ms), 1u);
  EXPECT_EQ(job.agreed[0].size(), 3u);  // x; "big" waits for rank 1
  EXPECT_EQ(job.agreed[0], job.agreed[1]);
}

TEST(GossipNegotiator, TensorsReadyTogetherShareACycle) {
  negotiation_options o;
  o.cycle_time = 1ms;
  hand_wired_pair job(o);
  auto x = spec("x", {4}), y = spec("y", {8});
  register_both(job, x, y, time_point{}, o.cycle_time);
  EXPECT_EQ(job.cycles[0], 1);
  EXPECT_EQ(job.agreed[0].size(), 2u);
  // One at a time, the second waits out the cycle time and needs a cycle of its own.
  auto t = time_point{} + 10ms;
  EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t), t), 1u);
  auto late = job.ranks[0].local_ready(y, t);
  EXPECT_TRUE(late.send.empty());
  ASSERT_TRUE(late.wake_at);
  EXPECT_EQ(*late.wake_at, t + 1ms);
}

TEST(GossipNegotiator, ARankAheadHoldsNewTensorsForTheCycleItsPeerStarts) {
  for (bool hold : {true, false}) {
    SCOPED_TRACE(hold ? "hold_when_ahead" : "without hold_when_ahead");
    negotiation_options o;
    o.cycle_time = 1ms;
    o.hold_when_ahead = hold;
    hand_wired_pair job(o);
    auto x = spec("x", {4}), y = spec("y", {8});
    time_point t0{};
    register_both(job, x, y, t0, o.cycle_time);
    int registered = job.cycles[0];
    // Rank 0 has x first: it starts a cycle, rank 1 joins it without x. Rank 0 is now ahead.
    auto t1 = t0 + 10ms;
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t1), t1), 1u);
    EXPECT_EQ(job.cycles[1], registered + 1);
    // Then y on rank 0. Ahead, it holds y: no cycle now, and none when its cycle time is up.
    // Without holding, it starts one for y once the cycle time is up (and learns rank 1 lacks y).
    auto t2 = t1 + 100us;
    auto a = job.ranks[0].local_ready(y, t2);
    EXPECT_TRUE(a.send.empty());
    if (hold) EXPECT_TRUE(!a.wake_at || *a.wake_at > t2 + 1s) << "a timer for a held tensor";
    job.pump(0, std::move(a), t2);
    EXPECT_EQ(job.pump(0, job.ranks[0].on_timer(t1 + 1ms), t1 + 1ms), hold ? 0u : 1u);
    // Rank 1 catches up with x and y at once: it starts a cycle, rank 0 joins it (with y if it
    // held it), and both tensors are agreed in that one cycle on both ranks.
    auto t3 = t1 + 5ms;
    EXPECT_EQ(job.pump(1, job.ranks[1].local_ready_all({x, y}, t3), t3), 1u);
    ASSERT_EQ(job.agreed[0].size(), 4u);
    EXPECT_EQ(job.agreed[0], job.agreed[1]);
    EXPECT_EQ(job.cycles[0], registered + (hold ? 2 : 3));
    EXPECT_EQ(job.cycles[1], job.cycles[0]);
    // Nobody is ahead now: a new tensor starts a cycle at once again.
    auto t4 = t3 + 10ms;
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t4), t4), 1u);
  }
}

TEST(GossipNegotiator, RanksAheadOfEachOtherNeverBothHold) {
  // Rank 0 waits for p, which rank 1 lacks; rank 1 waits for q, which rank 0 lacks. Neither is
  // ahead, so a tensor new on both (z) starts a cycle and is agreed, even though p and q are
  // still pending. (If both held z, neither would ever announce it.)
  negotiation_options o;
  o.cycle_time = 1ms;
  o.hold_when_ahead = true;
  hand_wired_pair job(o);
  auto p = spec("p", {1}), q = spec("q", {2}), z = spec("z", {3});
  time_point t0{};
  actions first[2];
  for (int r : {0, 1}) first[r] = job.ranks[r].local_ready_all({p, q, z}, t0);
  for (int r : {0, 1}) job.pump(r, std::move(first[r]), t0);
  ASSERT_EQ(job.agreed[0].size(), 3u);
  auto t1 = t0 + 10ms;
  job.pump(0, job.ranks[0].local_ready(p, t1), t1);
  auto t2 = t1 + 2ms;
  job.pump(1, job.ranks[1].local_ready(q, t2), t2);
  auto t3 = t2 + 2ms;
  job.pump(0, job.ranks[0].local_ready(z, t3), t3);
  job.pump(1, job.ranks[1].local_ready(z, t3 + 2ms), t3 + 2ms);
  for (int r : {0, 1}) job.pump(r, job.ranks[r].on_timer(t3 + 5ms), t3 + 5ms);
  ASSERT_EQ(job.agreed[0].size(), 4u);
  EXPECT_EQ(job.agreed[0], job.agreed[1]);
  EXPECT_EQ(job.ranks[0].registry().spec(job.agreed[0].back()).name, "z");
}

}  // namespace
}  // namespace chorus::negotiation
