// The autotuner's window agreement in the negotiation (runtime/negotiation/ledger.hpp): a
// window is agreed, with the minimum score, once every rank scored it, identically on every
// rank and under both strategies; a rank whose proposal digest differs stops the job with a
// protocol error that names it.
#include <gtest/gtest.h>

#include "runtime/negotiation/simulator.hpp"

namespace chorus::negotiation {
namespace {

std::unique_ptr<simulator> make(int n, const char* strategy, uint64_t seed) {
  simulator_options o;
  o.strategy = strategy;
  o.seed = seed;
  o.through_codec = true;  // the new message fields travel the wire
  auto sim = simulator::create(n, o);
  EXPECT_TRUE(sim.ok());
  return std::move(sim.value());
}

class WindowAgreement : public ::testing::TestWithParam<const char*> {};

TEST_P(WindowAgreement, AgreedOnceEveryRankScored) {
  auto sim = make(5, GetParam(), 17);
  // Ranks score at different times: nothing is agreed until the last one has.
  for (int r = 0; r < 4; ++r) sim->submit_score(r, 10.0 + r, 0xabc);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(sim->record(r).windows.empty()) << "rank " << r;
  sim->submit_score(4, 7.5, 0xabc);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 5; ++r) {
    const auto& rec = sim->record(r);
    ASSERT_EQ(rec.windows.size(), 1u) << "rank " << r;
    EXPECT_EQ(rec.windows[0].score, 7.5);
    EXPECT_EQ(rec.windows[0].window, 1u);
    EXPECT_EQ(rec.windows[0].cycle, sim->record(0).windows[0].cycle);
    EXPECT_FALSE(rec.fatal);
  }
  // The next window starts empty.
  for (int r = 0; r < 5; ++r) sim->submit_score(r, 20.0 - r, 0xdef);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 5; ++r) {
    ASSERT_EQ(sim->record(r).windows.size(), 2u);
    EXPECT_EQ(sim->record(r).windows[1].score, 16.0);
    EXPECT_EQ(sim->record(r).windows[1].window, 2u);
  }
  EXPECT_EQ(sim->divergence(), "");
}

TEST_P(WindowAgreement, DivergingRankIsNamed) {
  auto sim = make(4, GetParam(), 3);
  for (int r = 0; r < 4; ++r) sim->submit_score(r, 1.0, r == 2 ? 0x2222 : 0x1111);
  sim->run_until_idle();
  for (int r = 0; r < 4; ++r) {
    const auto& rec = sim->record(r);
    ASSERT_TRUE(rec.fatal) << "rank " << r;
    EXPECT_EQ(rec.fatal->code(), errc::protocol);
    EXPECT_EQ(rec.fatal->message(),
              "autotune: ranks computed different proposals for window 1: ranks 0-1,3 digest 0000000000001111; "
              "rank 2 digest 0000000000002222");
    EXPECT_TRUE(rec.windows.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, WindowAgreement, ::testing::Values("gossip", "central"));

}  // namespace
}  // namespace chorus::negotiation
