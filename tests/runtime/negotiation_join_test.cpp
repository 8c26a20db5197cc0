// Horovod's join in the negotiation core, through the scale simulator (both strategies, every
// message through the codec): a joined rank counts as ready for every tensor the others agree
// on, names it never announced included; once every rank has joined, every rank reports the
// same join cycle and last rank; afterwards negotiation is back to normal (a tensor needs every
// rank again). What Horovod refuses while a rank has joined (allgather, alltoall, broadcast) ends
// with the same error on every rank. Randomised: the seed is printed; CHORUS_TEST_SEED re-runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/negotiation/simulator.hpp"
#include "tests/support/negotiation_sim.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus::negotiation {
namespace {

using chorus::testing::make_sim;
using chorus::testing::spec;

/// The names of every agreed batch of `rank`, in order.
std::vector<std::string> agreed_names(simulator& sim, int rank) {
  std::vector<std::string> out;
  for (const auto& b : sim.record(rank).batches)
    for (auto id : b.ids) out.push_back(sim.strategy(rank).registry().spec(id).name);
  return out;
}

class join : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(join, joined_ranks_are_ready_for_everything_until_the_last_one_joins) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_join_test", static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  // Every rank but `last` joins, one by one, in a random order; rank `last` keeps training.
  const int last = static_cast<int>(rng() % n);
  std::vector<int> joiners;
  for (int r = 0; r < n; ++r)
    if (r != last) joiners.push_back(r);
  std::shuffle(joiners.begin(), joiners.end(), rng);
  // A tensor every rank knows first (it gets an id while all are in), then names only the
  // ranks still in announce.
  for (int r = 0; r < n; ++r) sim->enqueue(r, spec("shared", {4}));
  ASSERT_TRUE(sim->run_until_idle());
  std::set<int> in;
  for (int r = 0; r < n; ++r) in.insert(r);
  std::vector<std::string> expected{"shared"};
  int step = 0;
  for (int j : joiners) {
    sim->request_join(j);
    in.erase(j);
    ASSERT_TRUE(sim->run_until_idle());
    EXPECT_TRUE(sim->strategy(j).joined());
    std::string name = "step" + std::to_string(step++);
    // A reducescatter or an allreduce: a joined rank takes part in both with neutral data.
    const auto kind = step % 2 ? collective_kind::reducescatter : collective_kind::allreduce;
    for (int r : in) sim->enqueue(r, spec(name, {step, 3}, dtype::f32, kind));
    for (int r : in) sim->enqueue(r, spec("shared", {4}));  // a known id, ready on the ranks still in
    sim->run_for(std::chrono::microseconds(rng() % 300));
    ASSERT_TRUE(sim->run_until_idle());
    expected.push_back("shared");
    expected.push_back(name);
  }
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(sim->record(r).joins.empty());
    auto got = agreed_names(*sim, r);
    std::multiset<std::string> got_set(got.begin(), got.end()), want(expected.begin(), expected.end());
    EXPECT_EQ(got_set, want);
    EXPECT_TRUE(sim->record(r).errors.empty());
    EXPECT_TRUE(sim->record(r).warnings.empty());
  }
  EXPECT_EQ(sim->divergence(), "");
  // The last rank joins: every rank learns it, in the same cycle.
  sim->request_join(last);
  ASSERT_TRUE(sim->run_until_idle());
  uint64_t cycle = 0;
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_EQ(sim->record(r).joins.size(), 1u);
    EXPECT_EQ(sim->record(r).joins[0].last_rank, last);
    if (r == 0) cycle = sim->record(r).joins[0].cycle;
    EXPECT_EQ(sim->record(r).joins[0].cycle, cycle);
    EXPECT_FALSE(sim->strategy(r).joined());
  }
  // Back to normal: a tensor only some ranks enqueued waits; with everyone it is agreed.
  auto before = agreed_names(*sim, 0).size();
  if (n > 1) {
    sim->enqueue(last, spec("after", {2}));
    ASSERT_TRUE(sim->run_until_idle());
    EXPECT_EQ(agreed_names(*sim, 0).size(), before);
  }
  for (int r = 0; r < n; ++r)
    if (n == 1 || r != last) sim->enqueue(r, spec("after", {2}));
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < n; ++r) {
    auto got = agreed_names(*sim, r);
    ASSERT_EQ(got.size(), before + 1) << "rank " << r;
    EXPECT_EQ(got.back(), "after");
  }
  EXPECT_EQ(sim->divergence(), "");
}

INSTANTIATE_TEST_SUITE_P(strategies_and_sizes, join,
                         ::testing::Combine(::testing::Values("gossip", "central"), ::testing::Range(1, 7)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param));
                         });

// Horovod refuses allgather, alltoall and broadcast while a rank has joined (a broadcast whose
// root has joined has nothing to send anyway). Each ends with the same invalid_argument error on
// every rank, naming the tensor and the joined rank, and the job goes on.
TEST_P(join, what_a_joined_rank_cannot_join_ends_with_the_same_error_everywhere) {
  auto [strategy, n] = GetParam();
  if (n < 2) GTEST_SKIP() << "needs a joined rank and a rank still in";
  auto sim = make_sim(strategy, n, 11 + static_cast<uint64_t>(n));
  sim->request_join(1);
  ASSERT_TRUE(sim->run_until_idle());
  const std::vector<tensor_spec> refused{
      spec("gather", {2, 3}, dtype::f32, collective_kind::allgather),
      spec("a2a", {4}, dtype::f32, collective_kind::alltoall),
      spec("bcast_from_joined", {4}, dtype::f32, collective_kind::broadcast, reduce_op::sum, 1),
      spec("bcast_from_0", {4}, dtype::f32, collective_kind::broadcast, reduce_op::sum, 0)};
  for (int r = 0; r < n; ++r) {
    if (r == 1) continue;
    for (const auto& s : refused) sim->enqueue(r, s);
    sim->enqueue(r, spec("sum", {4}));
  }
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& errors = sim->record(r).errors;
    ASSERT_EQ(errors.size(), refused.size());
    for (const auto& e : errors) {
      EXPECT_EQ(e.code, errc::invalid_argument);
      EXPECT_NE(e.message.find("'" + e.name + "'"), std::string::npos) << e.message;
      EXPECT_NE(e.message.find("rank 1"), std::string::npos) << e.message;
    }
    EXPECT_EQ(agreed_names(*sim, r), std::vector<std::string>{"sum"});
  }
  EXPECT_EQ(sim->divergence(), "");
}

TEST(join_last_rank, several_ranks_joining_in_one_cycle_name_the_highest) {
  auto sim = make_sim("gossip", 4, 7);
  sim->request_join(1);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r : {3, 0, 2}) sim->request_join(r);  // all in the same cycle
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(sim->record(r).joins.size(), 1u) << "rank " << r;
    EXPECT_EQ(sim->record(r).joins[0].last_rank, 3) << "rank " << r;
  }
  // A second join epoch works the same way.
  for (int r : {0, 1, 3}) sim->request_join(r);
  ASSERT_TRUE(sim->run_until_idle());
  sim->request_join(2);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(sim->record(r).joins.size(), 2u) << "rank " << r;
    EXPECT_EQ(sim->record(r).joins[1].last_rank, 2) << "rank " << r;
  }
}

}  // namespace
}  // namespace chorus::negotiation
