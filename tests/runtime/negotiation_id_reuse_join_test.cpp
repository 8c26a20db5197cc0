// Reuse of retired tensor ids (runtime/negotiation/registry.hpp) beside a joined rank: it
// follows re-registrations and transient names it never announces, reused ids included, for
// both strategies and N = 2..5, and an old spec it enqueues during a re-registration goes by
// name, never under the retired id. Through the scale simulator with every message through
// the codec. Randomised: the seed is printed; CHORUS_TEST_SEED re-runs it. Without a joined
// rank: negotiation_id_reuse_test.cpp.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/negotiation/simulator.hpp"
#include "tests/support/id_reuse_sim.hpp"
#include "tests/support/negotiation_sim.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus::negotiation {
namespace {

using namespace std::chrono_literals;
using chorus::testing::spec;
using namespace id_reuse_sim;

// A joined rank follows re-registrations it never announces, reused ids included, and
// contributes to every one of them; after its join ends it uses the reused ids like the rest.
class id_reuse_join : public id_reuse {};

TEST_P(id_reuse_join, a_joined_rank_follows_reused_ids) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_id_reuse_test", 300 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  run_step(*sim, std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), {spec("x", {1}), spec("y", {1})}),
           rng);
  if (::testing::Test::HasFatalFailure()) return;
  sim->request_join(n - 1);
  ASSERT_TRUE(sim->run_until_idle());
  for (int step = 2; step < 12; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<std::vector<tensor_spec>> specs(static_cast<std::size_t>(n - 1), {spec("x", {step}), spec("y", {1})});
    specs.push_back({});
    std::vector<std::size_t> before;
    for (int r = 0; r < n; ++r) before.push_back(sim->record(r).batch_names.size());
    run_step(*sim, specs, rng);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(agreed_since(*sim, before[static_cast<std::size_t>(r)], r), (std::vector<std::string>{"x", "y"}))
          << "rank " << r;
    expect_identical_registries(*sim);
    EXPECT_EQ(sim->strategy(n - 1).registry().spec(*sim->strategy(n - 1).registry().find("x")), spec("x", {step}));
  }
  EXPECT_GT(sim->strategy(n - 1).registry().reused_count(), 0u);
  EXPECT_LE(sim->strategy(n - 1).registry().size(), 2 + delay);
  // Every rank joins: the join ends; then every rank uses x again, by its reused id.
  for (int r = 0; r < n - 1; ++r) sim->request_join(r);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < n; ++r) ASSERT_EQ(sim->record(r).joins.size(), 1u) << "rank " << r;
  std::vector<std::size_t> before;
  for (int r = 0; r < n; ++r) before.push_back(sim->record(r).batch_names.size());
  run_step(*sim, std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), {spec("x", {11}), spec("y", {1})}),
           rng);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed_since(*sim, before[static_cast<std::size_t>(r)], r), (std::vector<std::string>{"x", "y"}))
        << "rank " << r;
    EXPECT_TRUE(sim->record(r).errors.empty());
    EXPECT_FALSE(sim->record(r).fatal);
  }
  expect_identical_registries(*sim);
  EXPECT_EQ(sim->divergence(), "");
}

// A joined rank takes part in the other ranks' transient operations (it never announces them)
// and follows their retirement; after the join ends every rank uses transient names again.
TEST_P(id_reuse_join, a_joined_rank_follows_transient_names) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_id_reuse_test", 600 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  int handle = 0;
  auto step_with = [&](bool joined_last) {
    auto name = "allreduce.noname." + std::to_string(handle++);
    std::vector<std::vector<tensor_spec>> specs(static_cast<std::size_t>(n), {spec("g", {4}), transient_spec(name, {1})});
    if (joined_last) specs.back().clear();
    std::vector<std::size_t> before;
    for (int r = 0; r < n; ++r) before.push_back(sim->record(r).batch_names.size());
    run_step(*sim, specs, rng);
    if (::testing::Test::HasFatalFailure()) return;
    auto want = std::vector<std::string>{"allreduce.noname." + std::to_string(handle - 1), "g"};
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(agreed_since(*sim, before[static_cast<std::size_t>(r)], r), want) << "rank " << r;
      EXPECT_LE(sim->strategy(r).registry().size(), 2 + delay) << "rank " << r;
      EXPECT_FALSE(sim->strategy(r).registry().find(want[0])) << "rank " << r;
    }
    expect_identical_registries(*sim);
  };
  step_with(false);
  sim->request_join(n - 1);
  ASSERT_TRUE(sim->run_until_idle());
  for (int step = 0; step < 30 && !::testing::Test::HasFatalFailure(); ++step) step_with(true);
  for (int r = 0; r < n - 1; ++r) sim->request_join(r);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < n; ++r) ASSERT_EQ(sim->record(r).joins.size(), 1u) << "rank " << r;
  for (int step = 0; step < 10 && !::testing::Test::HasFatalFailure(); ++step) step_with(false);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(sim->record(r).errors.empty()) << "rank " << r;
    EXPECT_FALSE(sim->record(r).fatal) << "rank " << r;
  }
  expect_identical_assignments(*sim);
  EXPECT_EQ(sim->divergence(), "");
}

INSTANTIATE_TEST_SUITE_P(negotiation, id_reuse_join,
                         ::testing::Combine(::testing::Values("gossip", "central"), ::testing::Range(2, 6)),
                         param_name);

// A joined rank that enqueues a name's old spec after its contribution to the cycle that
// re-registers the name: its op must not stay pending under the retired id (which will stand
// for another tensor once handed out again); it goes by name, and meets the other rank's next
// op on that name as the usual mismatch, on both ranks.
TEST(id_reuse_join_edge, an_old_spec_enqueued_by_a_joined_rank_during_the_re_registration_goes_by_name) {
  for (std::string strategy : {"gossip", "central"}) {
    SCOPED_TRACE(strategy);
    simulator_options o;
    o.strategy = strategy;
    o.negotiation.cycle_time = 100us;
    o.min_latency = o.max_latency = 50us;  // fixed: the order below is certain
    o.through_codec = true;
    auto made = simulator::create(2, o);
    ASSERT_TRUE(made.ok());
    auto& sim = **made;
    sim.enqueue(0, spec("x", {3}));
    sim.enqueue(1, spec("x", {3}));
    ASSERT_TRUE(sim.run_until_idle());
    sim.request_join(1);
    ASSERT_TRUE(sim.run_until_idle());
    sim.run_for(1ms);
    // Both ranks start the next cycle at once (rank 1 with a score); rank 0 announces x anew.
    sim.submit_score(1, 1.0);
    sim.enqueue(0, spec("x", {4}));
    sim.run_for(10us);  // rank 1's contribution is taken, the cycle not finished
    ASSERT_EQ(sim.strategy(1).cycles_done(), sim.strategy(0).cycles_done());
    sim.enqueue(1, spec("x", {3}));  // the registered spec: one bit of x's current id
    ASSERT_TRUE(sim.run_until_idle());
    // That cycle re-registered x as [4] (rank 1 joined counts as agreeing).
    for (int r = 0; r < 2; ++r) EXPECT_EQ(sim.strategy(r).registry().spec(*sim.strategy(r).registry().find("x")),
                                          spec("x", {4}));
    // Rank 0's next x ([4], the registered spec) meets rank 1's [3]: a mismatch on both.
    sim.run_for(1ms);
    sim.enqueue(0, spec("x", {4}));
    ASSERT_TRUE(sim.run_until_idle());
    for (int r = 0; r < 2; ++r) {
      const auto& e = sim.record(r).errors;
      ASSERT_EQ(e.size(), 1u) << "rank " << r;
      EXPECT_EQ(e[0].message, "allreduce('x'): shape [3] on rank 1 but [4] on rank 0") << "rank " << r;
      EXPECT_TRUE(sim.record(r).warnings.empty()) << "rank " << r;
      EXPECT_FALSE(sim.record(r).fatal);
    }
    EXPECT_EQ(sim.divergence(), "");
    expect_identical_registries(sim);
    // Nothing is left pending under an id: a new name may take the retired one, safely.
    for (int step = 0; step < 4; ++step) {
      sim.run_for(1ms);
      sim.enqueue(0, spec("z" + std::to_string(step), {1}));
      ASSERT_TRUE(sim.run_until_idle());
    }
    EXPECT_GT(sim.strategy(0).registry().reused_count(), 0u);
    for (int r = 0; r < 2; ++r) {
      std::vector<std::string> agreed;
      for (const auto& b : sim.record(r).batch_names) agreed.insert(agreed.end(), b.begin(), b.end());
      EXPECT_EQ(agreed, (std::vector<std::string>{"x", "x", "z0", "z1", "z2", "z3"})) << "rank " << r;
    }
    expect_identical_registries(sim);
  }
}

}  // namespace
}  // namespace chorus::negotiation
