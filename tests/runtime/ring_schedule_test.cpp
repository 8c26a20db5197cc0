// The ring and recursive-doubling schedules (runtime/collectives/ring_schedule.hpp), checked by
// symbolic simulation: every block is a multiset of contributing ranks, every step moves and
// merges those sets exactly as the ops do, and the end state must hold each rank exactly once.
#include "runtime/collectives/ring_schedule.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus {
namespace {

// How many times each rank contributed to one block (a multiset of ranks).
using contribution = std::vector<int>;

contribution only(int rank, int size) {
  contribution c(size, 0);
  c[rank] = 1;
  return c;
}

contribution merged(const contribution& a, const contribution& b) {
  contribution c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

bool everyone_once(const contribution& c) {
  for (int n : c)
    if (n != 1) return false;
  return true;
}

std::string show(const contribution& c) {
  std::string s = "{";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? "," : "") + std::to_string(c[i]);
  return s + "}";
}

int left_of(int r, int n) { return (r + n - 1) % n; }

// state[r][b]: what rank r's copy of block b holds. Runs the ring step by step, all ranks at
// once: in step g rank r receives what its left neighbour sends in step g.
void run_ring(std::vector<std::vector<contribution>>& state, const std::vector<std::vector<ring_step>>& steps) {
  const int n = static_cast<int>(state.size());
  for (std::size_t g = 0; g < steps[0].size(); ++g) {
    auto before = state;
    for (int r = 0; r < n; ++r) {
      const auto& mine = steps[r][g];
      const auto& theirs = steps[left_of(r, n)][g];
      ASSERT_EQ(mine.recv_block, theirs.send_block) << "n=" << n << " rank=" << r << " step=" << g;
      ASSERT_EQ(mine.reduce, theirs.reduce) << "n=" << n << " rank=" << r << " step=" << g;
      const auto& incoming = before[left_of(r, n)][theirs.send_block];
      auto& block = state[r][mine.recv_block];
      block = mine.reduce ? merged(block, incoming) : incoming;
    }
  }
}

class ring_schedule_n : public ::testing::TestWithParam<int> {};

TEST_P(ring_schedule_n, allreduce_gives_every_rank_every_block_reduced_once) {
  const int n = GetParam();
  std::vector<std::vector<ring_step>> steps(n);
  std::vector<std::vector<contribution>> state(n, std::vector<contribution>(n));
  for (int r = 0; r < n; ++r) {
    steps[r] = ring_allreduce_steps(r, n);
    ASSERT_EQ(steps[r].size(), static_cast<std::size_t>(2 * (n - 1))) << "rank " << r;
    for (int b = 0; b < n; ++b) state[r][b] = only(r, n);
  }
  run_ring(state, steps);
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < n; ++b) EXPECT_TRUE(everyone_once(state[r][b])) << "rank " << r << " block " << b << " " << show(state[r][b]);
}

TEST_P(ring_schedule_n, reduce_scatter_leaves_block_r_plus_1_fully_reduced_on_rank_r) {
  const int n = GetParam();
  std::vector<std::vector<ring_step>> steps(n);
  std::vector<std::vector<contribution>> state(n, std::vector<contribution>(n));
  for (int r = 0; r < n; ++r) {
    auto all = ring_allreduce_steps(r, n);
    steps[r].assign(all.begin(), all.begin() + (n - 1));
    for (const auto& s : steps[r]) EXPECT_TRUE(s.reduce);
    for (int b = 0; b < n; ++b) state[r][b] = only(r, n);
  }
  run_ring(state, steps);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(everyone_once(state[r][(r + 1) % n])) << "rank " << r;
}

TEST_P(ring_schedule_n, block_received_in_step_g_is_sent_in_step_g_plus_1) {
  const int n = GetParam();
  for (int r = 0; r < n; ++r) {
    for (auto steps : {ring_allreduce_steps(r, n), ring_allgather_steps(r, n)}) {
      for (std::size_t g = 0; g + 1 < steps.size(); ++g)
        EXPECT_EQ(steps[g].recv_block, steps[g + 1].send_block) << "n=" << n << " rank=" << r << " step=" << g;
    }
  }
}

TEST_P(ring_schedule_n, allgather_gives_everyone_all_blocks) {
  const int n = GetParam();
  std::vector<std::vector<ring_step>> steps(n);
  // Block b starts as rank b's own data; empty (all zero) everywhere else.
  std::vector<std::vector<contribution>> state(n, std::vector<contribution>(n, contribution(n, 0)));
  for (int r = 0; r < n; ++r) {
    steps[r] = ring_allgather_steps(r, n);
    ASSERT_EQ(steps[r].size(), static_cast<std::size_t>(n - 1));
    if (n > 1) EXPECT_EQ(steps[r][0].send_block, r) << "rank " << r << " starts with its own block";
    for (const auto& s : steps[r]) EXPECT_FALSE(s.reduce);
    state[r][r] = only(r, n);
  }
  run_ring(state, steps);
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < n; ++b) EXPECT_EQ(state[r][b], only(b, n)) << "rank " << r << " block " << b << " " << show(state[r][b]);
}

INSTANTIATE_TEST_SUITE_P(sizes, ring_schedule_n, ::testing::Range(1, 13));

// Recursive doubling: each step, every rank sends its current buffer (as it was before the
// step's receive) and then applies what it receives.
class recursive_doubling_n : public ::testing::TestWithParam<int> {};

TEST_P(recursive_doubling_n, every_rank_ends_with_the_full_reduction_once) {
  const int n = GetParam();
  std::vector<std::vector<exchange_step>> steps(n);
  std::vector<contribution> buf(n);
  for (int r = 0; r < n; ++r) {
    steps[r] = recursive_doubling_steps(r, n);
    buf[r] = only(r, n);
  }
  const std::size_t rounds = steps[0].size();
  for (int r = 0; r < n; ++r) ASSERT_EQ(steps[r].size(), rounds) << "rank " << r;
  for (std::size_t k = 0; k < rounds; ++k) {
    auto before = buf;
    for (int r = 0; r < n; ++r) {
      const auto& s = steps[r][k];
      if (s.send_to >= 0) {
        const auto& peer = steps[s.send_to][k];
        EXPECT_EQ(peer.recv_from, r) << "n=" << n << " step=" << k << ": rank " << r << " sends to " << s.send_to
                                     << " which receives from " << peer.recv_from;
      }
      if (s.recv_from < 0) continue;
      ASSERT_EQ(steps[s.recv_from][k].send_to, r) << "n=" << n << " step=" << k << " rank=" << r;
      buf[r] = s.reduce ? merged(buf[r], before[s.recv_from]) : before[s.recv_from];
    }
  }
  for (int r = 0; r < n; ++r) EXPECT_TRUE(everyone_once(buf[r])) << "n=" << n << " rank " << r << " " << show(buf[r]);
}

TEST_P(recursive_doubling_n, uses_log2_rounds_plus_fold_and_unfold) {
  const int n = GetParam();
  int p2 = 1, log2 = 0;
  while (p2 * 2 <= n) p2 *= 2, ++log2;
  for (int r = 0; r < n; ++r) EXPECT_EQ(recursive_doubling_steps(r, n).size(), static_cast<std::size_t>(log2 + 2));
}

INSTANTIATE_TEST_SUITE_P(sizes, recursive_doubling_n, ::testing::Range(1, 34));

TEST(block_begin, partitions_exactly_and_evenly) {
  for (std::size_t count : {0u, 1u, 2u, 7u, 8u, 100u, 1000u, 1001u}) {
    for (int parts = 1; parts <= 13; ++parts) {
      EXPECT_EQ(block_begin(count, parts, 0), 0u);
      EXPECT_EQ(block_begin(count, parts, parts), count) << "count=" << count << " parts=" << parts;
      for (int b = 0; b < parts; ++b) {
        std::size_t len = block_begin(count, parts, b + 1) - block_begin(count, parts, b);
        EXPECT_GE(block_begin(count, parts, b + 1), block_begin(count, parts, b));
        EXPECT_TRUE(len == count / parts || len == count / parts + 1)
            << "count=" << count << " parts=" << parts << " block " << b << " has " << len;
      }
    }
  }
}

}  // namespace
}  // namespace chorus
