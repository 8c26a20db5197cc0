// The hierarchical schedules (runtime/collectives/hier_schedule.hpp) and their gating by
// segment (hier_readiness.hpp), checked by symbolic simulation as ring_schedule_test does: each
// element holds the multiset of ranks that contributed to it; transfers move and merge those sets
// frame by frame as hier_op does (a frame of a phase waits until no receive of an earlier phase
// still covers its bytes, sends without a receive first go out segment by segment as their bytes
// become ready, forwards follow receives), delivered in a random order. A send reads the
// sender's bytes only when it is delivered, as a zero-copy transport may, so a receive that
// overwrites bytes still being sent shows. The end state must hold every rank exactly once in
// every element of every rank. Also: host grouping and the algorithm choice.
#include "runtime/collectives/hier_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/support/hier_sim.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using testing::contribution;
using testing::identities;
using testing::simulation;

// Every rank starts holding only its own contribution in every element.
simulation allreduce_sim(const host_groups& g, std::size_t count, allreduce_choice v, std::size_t segment,
                         uint64_t seed) {
  const int n = static_cast<int>(g.host_of.size());
  std::vector<std::vector<hier_step>> steps;
  std::vector<std::vector<contribution>> elems;
  for (int r = 0; r < n; ++r) {
    steps.push_back(v == allreduce_choice::hier_leader ? hier_leader_steps(g, r, count, 1)
                                                       : hier_sharded_steps(g, r, count, 1));
    elems.emplace_back(count, contribution(static_cast<std::size_t>(n), 0));
    for (auto& e : elems.back()) e[static_cast<std::size_t>(r)] = 1;
  }
  return simulation(std::move(steps), std::move(elems), segment, seed);
}

void expect_everyone_once(const simulation& sim, int n, const std::string& what) {
  for (int r = 0; r < n; ++r) {
    const auto& s = sim.rank(r);
    EXPECT_TRUE(sim.idle(r)) << what << " rank " << r << " stopped with frames held, sends waiting or bytes due";
    for (std::size_t k = 0; k < s.elems.size(); ++k)
      for (int q = 0; q < n; ++q)
        if (s.elems[k][static_cast<std::size_t>(q)] != 1) {
          ADD_FAILURE() << what << ": rank " << r << " element " << k << " holds rank " << q << " "
                        << s.elems[k][static_cast<std::size_t>(q)] << " times";
          return;
        }
  }
}

const std::vector<std::vector<int>> layouts = {{2, 2}, {2, 1}, {1, 2}, {1, 1, 1}, {3, 1, 2}, {4, 4}, {2, 2, 2},
                                               {3},    {1},    {5, 3}, {1, 4},    {2, 3, 4}, {4, 1}};

TEST(hier_schedule, every_rank_ends_with_every_contribution_once) {
  for (auto v : {allreduce_choice::hier_sharded, allreduce_choice::hier_leader})
    for (const auto& sizes : layouts)
      for (bool interleave : {false, true})
        for (std::size_t count : {0, 1, 2, 7, 13, 100})
          for (std::size_t segment : {std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
            auto g = group_by_host(identities(sizes, interleave));
            std::string what = std::string(name_of(v)) + " " + g.describe() + " count=" + std::to_string(count) +
                               " segment=" + std::to_string(segment);
            uint64_t seed = testing::seed_for("hier_schedule_test", count * 131 + sizes.size() * 7 + segment);
            simulation sim = allreduce_sim(g, count, v, segment, seed);
            sim.run();
            ASSERT_FALSE(::testing::Test::HasFatalFailure()) << what << " seed " << seed;
            expect_everyone_once(sim, static_cast<int>(g.host_of.size()), what);
          }
}

TEST(hier_schedule, segments_cross_hosts_while_the_host_still_reduces_others) {
  // 2 hosts x 4 ranks, 800 elements in frames of 10: every rank starts its cross-host ring, and
  // its allgather inside the host, while bytes of the earlier phase are still due (whatever the
  // delivery order); results stay exact.
  auto g = group_by_host(identities({4, 4}));
  const uint64_t seed = testing::seed_for("hier_schedule_test", 4242);
  simulation sim = allreduce_sim(g, 800, allreduce_choice::hier_sharded, 10, seed);
  sim.run();
  ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << seed;
  expect_everyone_once(sim, 8, "2x4 segment 10");
  for (int r = 0; r < 8; ++r) EXPECT_GT(sim.early(r), 0) << "rank " << r << " seed " << seed;
}

TEST(hier_schedule, sharded_moves_two_h_minus_one_over_h_of_each_shard_across_hosts) {
  // 2 hosts x 4 ranks, 800 elements: each rank sends 2 * (2-1)/2 of its 200-element shard
  // across, and (4-1)/4 of the buffer twice inside its host.
  auto g = group_by_host(identities({4, 4}));
  for (int r = 0; r < 8; ++r) {
    std::size_t across = 0, inside = 0;
    for (const auto& s : hier_sharded_steps(g, r, 800, 1))
      (g.host_of[static_cast<std::size_t>(s.send.peer)] == g.host_of[static_cast<std::size_t>(r)] ? inside : across) +=
          s.send.length;
    EXPECT_EQ(across, 200u) << "rank " << r;
    EXPECT_EQ(inside, 2u * 600u) << "rank " << r;
  }
}

TEST(hier_schedule, uneven_hosts_give_the_lone_rank_every_shard) {
  auto g = group_by_host(identities({2, 1}));
  ASSERT_EQ(g.describe(), "2 hosts: [0,1] [2]");
  std::map<int, int> rings;  // peers across hosts of rank 2
  for (const auto& s : hier_sharded_steps(g, 2, 10, 4)) {
    EXPECT_EQ(s.phase, 1);
    ++rings[s.send.peer];
  }
  EXPECT_EQ(rings, (std::map<int, int>{{0, 2}, {1, 2}}));
}

TEST(hier_schedule, groups_follow_identities_not_rank_order) {
  auto g = group_by_host({"b", "a", "b", "a", "c"});
  EXPECT_EQ(g.describe(), "3 hosts: [0,2] [1,3] [4]");
  EXPECT_EQ(g.local_of, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(g.host_of, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_TRUE(g.hierarchical());
  EXPECT_FALSE(group_by_host({"a", "b", "c"}).hierarchical()) << "one rank per host";
  EXPECT_FALSE(group_by_host({"a", "a", "a"}).hierarchical()) << "one host";
}

TEST(hier_schedule, choice_by_mode_size_and_topology) {
  auto two_by_two = group_by_host({"a", "a", "b", "b"});
  auto three_by_one = group_by_host({"a", "b", "c"});
  using c = allreduce_choice;
  EXPECT_EQ(choose_allreduce(hier_mode::automatic, two_by_two, 4096, 65536), c::recursive_doubling);
  EXPECT_EQ(choose_allreduce(hier_mode::automatic, two_by_two, 1 << 22, 65536), c::hier_sharded);
  EXPECT_EQ(choose_allreduce(hier_mode::on, two_by_two, 4096, 65536), c::hier_leader);
  EXPECT_EQ(choose_allreduce(hier_mode::on, two_by_two, 1 << 22, 65536), c::hier_sharded);
  EXPECT_EQ(choose_allreduce(hier_mode::off, two_by_two, 1 << 22, 65536), c::ring);
  EXPECT_EQ(choose_allreduce(hier_mode::automatic, three_by_one, 1 << 22, 65536), c::ring);
  EXPECT_EQ(choose_allreduce(hier_mode::on, three_by_one, 1 << 22, 65536), c::ring) << "nothing to gain";
  hier_mode m;
  EXPECT_TRUE(parse_hier_mode("1", m));
  EXPECT_EQ(m, hier_mode::on);
  EXPECT_FALSE(parse_hier_mode("yes", m));
}

TEST(hier_schedule, sharded_chunks_are_cut_by_the_most_ranks_on_a_host) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  auto cut = [](std::vector<int> sizes, std::size_t chunk, std::size_t elem) {
    auto c = hier_chunks(group_by_host(identities(sizes)), chunk, elem);
    return std::make_pair(c.bytes, c.charge);
  };
  using p = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(cut({4, 4}, 4 * MiB, 4), (p{256u << 10, 1 * MiB})) << "L = 4: 256 KiB chunks, 8 in a 2-slot window";
  EXPECT_EQ(cut({2, 2}, 4 * MiB, 4), (p{1 * MiB, 2 * MiB}));
  EXPECT_EQ(cut({2, 1}, 4 * MiB, 4), (p{1 * MiB, 2 * MiB})) << "uneven: by the larger host";
  EXPECT_EQ(cut({1, 1, 1}, 4 * MiB, 4), (p{4 * MiB, 4 * MiB})) << "no hierarchy: flat chunks";
  // Whole elements: 4 MiB / 9 = 466033.78 bytes, down to a multiple of 8; a third of a slot.
  EXPECT_EQ(cut({3, 3}, 4 * MiB, 8), (p{466032u, 1398101u}));
  // Shards of at least 64 KiB: 8 ranks per host cut 4 MiB into 512 KiB (not 64 KiB) chunks.
  EXPECT_EQ(cut({8, 8}, 4 * MiB, 4), (p{512u << 10, 512u << 10}));
  EXPECT_EQ(cut({4, 4}, 1 * MiB, 4), (p{256u << 10, 256u << 10})) << "1 MiB slots: the floor, still 8 per stream";
  // Never above a flat chunk.
  EXPECT_EQ(cut({4, 4}, 64u << 10, 4), (p{64u << 10, 16u << 10}));
  EXPECT_EQ(cut({4, 4}, 8, 8), (p{8, 2}));
}

}  // namespace
}  // namespace chorus
