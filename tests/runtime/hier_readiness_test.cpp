// hier_readiness (runtime/collectives/hier_readiness.hpp): a range is ready for a phase exactly when no
// receive of an earlier phase still covers one of its bytes; counts are per byte, so a range
// received twice in one phase (a ring's reduce-scatter, then its allgather) waits for both.
#include "runtime/collectives/hier_readiness.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

hier_step recv_step(int phase, std::size_t offset, std::size_t length) {
  hier_step s;
  s.phase = phase;
  s.recv = {1, offset, length, 0};
  return s;
}

TEST(hier_readiness, a_phase_waits_only_for_the_bytes_it_touches) {
  // Phase 0 receives [0, 100); phase 1 receives [40, 60) twice and [100, 120) once.
  hier_readiness g({recv_step(0, 0, 100), recv_step(1, 40, 20), recv_step(1, 40, 20), recv_step(1, 100, 20)});
  EXPECT_TRUE(g.ready(0, 0, 200)) << "phase 0 waits for nothing";
  EXPECT_FALSE(g.ready(1, 0, 10));
  EXPECT_TRUE(g.ready(1, 100, 50)) << "no phase-0 receive there";
  EXPECT_FALSE(g.ready(1, 99, 2)) << "one byte of phase 0 left";
  ASSERT_TRUE(g.received(0, 0, 50));
  EXPECT_TRUE(g.ready(1, 0, 50));
  EXPECT_FALSE(g.ready(1, 49, 2));
  ASSERT_TRUE(g.received(0, 50, 50));
  EXPECT_TRUE(g.ready(1, 0, 100));
  EXPECT_FALSE(g.ready(2, 0, 100)) << "phase 1 still expects [40, 60) twice";
  EXPECT_TRUE(g.ready(2, 0, 40));
  EXPECT_TRUE(g.ready(2, 60, 40));
  ASSERT_TRUE(g.received(1, 40, 20));
  EXPECT_FALSE(g.ready(2, 50, 1)) << "once of twice";
  ASSERT_TRUE(g.received(1, 40, 20));
  EXPECT_TRUE(g.ready(2, 0, 100));
  EXPECT_FALSE(g.ready(2, 110, 1));
  EXPECT_FALSE(g.received(1, 40, 1)) << "a third time is more than planned";
  EXPECT_FALSE(g.received(3, 0, 1)) << "no phase 3";
  EXPECT_TRUE(g.ready(2, 40, 20)) << "a refused receive changes nothing";
}

TEST(hier_readiness, random_receives_agree_with_a_count_per_byte) {
  const uint64_t seed = testing::seed_for("hier_readiness_test", 1);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const std::size_t size = 1 + rng() % 64;
    std::vector<hier_step> steps;
    std::vector<std::vector<int>> count(3, std::vector<int>(size, 0));
    for (int k = 0, n = 1 + static_cast<int>(rng() % 8); k < n; ++k) {
      std::size_t a = rng() % size, b = rng() % size;
      if (a > b) std::swap(a, b);
      int p = static_cast<int>(rng() % 3);
      steps.push_back(recv_step(p, a, b - a + 1));
      for (std::size_t x = a; x <= b; ++x) ++count[static_cast<std::size_t>(p)][x];
    }
    hier_readiness g(steps);
    std::shuffle(steps.begin(), steps.end(), rng);
    for (const auto& s : steps) {
      // Receive in two pieces, checking every range of every phase against the counts after each.
      const std::size_t cut = s.recv.offset + rng() % s.recv.length;
      for (auto [lo, hi] : {std::pair{s.recv.offset, cut}, std::pair{cut, s.recv.offset + s.recv.length}}) {
        ASSERT_TRUE(g.received(s.phase, lo, hi - lo)) << "seed " << seed;
        for (std::size_t x = lo; x < hi; ++x) --count[static_cast<std::size_t>(s.phase)][x];
      }
      for (int p = 0; p <= 3; ++p)
        for (std::size_t a = 0; a < size; ++a)
          for (std::size_t b = a + 1; b <= size; ++b) {
            bool want = true;
            for (int q = 0; q < p && q < 3; ++q)
              for (std::size_t x = a; x < b; ++x) want = want && count[static_cast<std::size_t>(q)][x] == 0;
            ASSERT_EQ(g.ready(p, a, b - a), want) << "seed " << seed << " phase " << p << " [" << a << ", " << b << ")";
          }
    }
  }
}

}  // namespace
}  // namespace chorus
