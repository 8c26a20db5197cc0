// The hierarchical allgather's step list (runtime/collectives/hier_allgather.hpp) by symbolic
// simulation (tests/support/hier_sim.hpp): every rank starts with only its own block, blocks of
// any length (0, 1, odd, differing by rank), even, uneven and interleaved hosts, frames in a
// random order; every rank must end with each element holding exactly its owner's block, and
// nothing held, waiting or due. Also: what crosses hosts, and the choice.
#include "runtime/collectives/hier_allgather.hpp"

#include <gtest/gtest.h>

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

std::vector<hier_block> blocks_of(const std::vector<std::size_t>& counts) {
  std::vector<hier_block> out;
  std::size_t at = 0;
  for (auto c : counts) {
    out.push_back({at, c});
    at += c;
  }
  return out;
}

// Element k of the result is owner[k]'s.
std::vector<int> owners_of(const std::vector<std::size_t>& counts) {
  std::vector<int> out;
  for (std::size_t r = 0; r < counts.size(); ++r) out.insert(out.end(), counts[r], static_cast<int>(r));
  return out;
}

simulation gather_sim(const host_groups& g, const std::vector<std::size_t>& counts, std::size_t segment,
                      uint64_t seed) {
  const int n = static_cast<int>(g.host_of.size());
  const auto owner = owners_of(counts);
  const auto blocks = blocks_of(counts);
  std::vector<std::vector<hier_step>> steps;
  std::vector<std::vector<contribution>> elems;
  for (int r = 0; r < n; ++r) {
    steps.push_back(hier_allgather_steps(g, r, blocks));
    for (const auto& s : steps.back()) EXPECT_FALSE(s.reduce && s.recv.peer >= 0) << "an allgather reduces nothing";
    elems.emplace_back(owner.size(), contribution(static_cast<std::size_t>(n), 0));
    for (std::size_t k = 0; k < owner.size(); ++k)
      if (owner[k] == r) elems.back()[k][static_cast<std::size_t>(r)] = 1;
  }
  return simulation(std::move(steps), std::move(elems), segment, seed);
}

void expect_gathered(const simulation& sim, const std::vector<std::size_t>& counts, const std::string& what) {
  const auto owner = owners_of(counts);
  const int n = static_cast<int>(counts.size());
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(sim.idle(r)) << what << " rank " << r << " stopped with frames held, sends waiting or bytes due";
    const auto& e = sim.rank(r).elems;
    for (std::size_t k = 0; k < e.size(); ++k)
      for (int q = 0; q < n; ++q)
        if (e[k][static_cast<std::size_t>(q)] != (q == owner[k] ? 1 : 0)) {
          ADD_FAILURE() << what << ": rank " << r << " element " << k << " (rank " << owner[k] << "'s) holds rank " << q
                        << " " << e[k][static_cast<std::size_t>(q)] << " times";
          return;
        }
  }
}

const std::vector<std::vector<int>> layouts = {{2, 2}, {2, 1}, {1, 2}, {1, 1, 1}, {3, 1, 2}, {4, 4}, {2, 2, 2},
                                               {3},    {1},    {5, 3}, {1, 4},    {2, 3, 4}, {4, 1}};

// Per-rank counts: all equal to `base`, or varying (0, 1, odd, larger) by rank.
std::vector<std::size_t> counts_for(int n, std::size_t base, bool vary) {
  std::vector<std::size_t> c(static_cast<std::size_t>(n), base);
  if (vary)
    for (std::size_t r = 0; r < c.size(); ++r) c[r] = (base * (r + 1) + r * 3) % 17;
  return c;
}

TEST(hier_allgather, every_rank_ends_with_every_block_exactly) {
  for (const auto& sizes : layouts)
    for (bool interleave : {false, true})
      for (std::size_t base : {0, 1, 7, 40})
        for (bool vary : {false, true})
          for (std::size_t segment : {std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
            auto g = group_by_host(identities(sizes, interleave));
            const int n = static_cast<int>(g.host_of.size());
            auto counts = counts_for(n, base, vary);
            std::string what = g.describe() + " base=" + std::to_string(base) + (vary ? " varying" : "") +
                               " segment=" + std::to_string(segment);
            uint64_t seed = testing::seed_for("hier_allgather_test", base * 131 + sizes.size() * 7 + segment + vary);
            simulation sim = gather_sim(g, counts, segment, seed);
            sim.run();
            ASSERT_FALSE(::testing::Test::HasFatalFailure()) << what << " seed " << seed;
            expect_gathered(sim, counts, what);
          }
}

TEST(hier_allgather, inside_hosts_forwards_while_the_rings_still_bring_segments) {
  // 2 hosts x 4 ranks, 100 elements each in frames of 10: every rank shares blocks of the other
  // host inside its own while bytes of its cross-host ring are still due.
  auto g = group_by_host(identities({4, 4}));
  std::vector<std::size_t> counts(8, 100);
  const uint64_t seed = testing::seed_for("hier_allgather_test", 4242);
  simulation sim = gather_sim(g, counts, 10, seed);
  sim.run();
  ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << seed;
  expect_gathered(sim, counts, "2x4 segment 10");
  for (int r = 0; r < 8; ++r) EXPECT_GT(sim.early(r), 0) << "rank " << r << " seed " << seed;
}

// Bytes rank r's steps send to other hosts and inside its own.
std::pair<std::size_t, std::size_t> sent(const host_groups& g, int r, const std::vector<hier_block>& blocks) {
  std::size_t across = 0, inside = 0;
  for (const auto& s : hier_allgather_steps(g, r, blocks))
    if (s.send.peer >= 0)
      (g.host_of[static_cast<std::size_t>(s.send.peer)] == g.host_of[static_cast<std::size_t>(r)] ? inside : across) +=
          s.send.length;
  return {across, inside};
}

TEST(hier_allgather, a_host_sends_h_minus_one_over_h_of_the_result_across) {
  // 2 hosts x 4 ranks of 100 bytes: each host sends its 400 bytes across once (the flat ring:
  // 700 of 800), and every rank sends 7 blocks in all, as in the flat ring.
  auto g = group_by_host(identities({4, 4}));
  auto blocks = blocks_of(std::vector<std::size_t>(8, 100));
  for (int r = 0; r < 8; ++r) {
    auto [across, inside] = sent(g, r, blocks);
    EXPECT_EQ(across, 100u) << "rank " << r;
    EXPECT_EQ(inside, 600u) << "rank " << r;
  }
  // 3 hosts x 2: 2/3 of the result out of each host.
  auto g3 = group_by_host(identities({2, 2, 2}));
  auto b3 = blocks_of(std::vector<std::size_t>(6, 10));
  for (int h = 0; h < 3; ++h)
    EXPECT_EQ(sent(g3, 2 * h, b3).first + sent(g3, 2 * h + 1, b3).first, 40u) << "host " << h;
}

TEST(hier_allgather, uneven_hosts_send_each_block_across_once) {
  // 2 + 1: the lone rank 2 is in both rings but sends its block in one only, and gets both.
  auto g = group_by_host(identities({2, 1}));
  auto blocks = blocks_of({5, 6, 7});
  EXPECT_EQ(sent(g, 2, blocks).first, 7u);
  EXPECT_EQ(sent(g, 2, blocks).second, 0u);
  EXPECT_EQ(sent(g, 0, blocks).first + sent(g, 1, blocks).first, 11u);
  std::map<int, std::size_t> from;  // what rank 2 receives, by peer
  for (const auto& s : hier_allgather_steps(g, 2, blocks))
    if (s.recv.peer >= 0) from[s.recv.peer] += s.recv.length;
  EXPECT_EQ(from, (std::map<int, std::size_t>{{0, 5}, {1, 6}})) << "ring 1 carries nothing of rank 2's";
}

TEST(hier_allgather, choice_by_mode_and_topology) {
  using c = allgather_choice;
  auto two_by_two = group_by_host({"a", "a", "b", "b"});
  EXPECT_EQ(choose_allgather(hier_mode::automatic, two_by_two), c::hier);
  EXPECT_EQ(choose_allgather(hier_mode::on, two_by_two), c::hier);
  EXPECT_EQ(choose_allgather(hier_mode::off, two_by_two), c::ring);
  EXPECT_EQ(choose_allgather(hier_mode::automatic, group_by_host({"a", "a", "b"})), c::hier) << "2 + 1";
  EXPECT_EQ(choose_allgather(hier_mode::on, group_by_host({"a", "b", "c"})), c::ring) << "one rank per host";
  EXPECT_EQ(choose_allgather(hier_mode::on, group_by_host({"a", "a", "a"})), c::ring) << "one host";
  EXPECT_STREQ(name_of(c::hier), "hier_allgather");
  EXPECT_STREQ(name_of(c::ring), "ring_allgather");
  // Wire ids: phase 2 of a 2-rank host next to 9 hosts of 64 needs 9 x 32 rings (> 256).
  std::vector<int> big(9, 64);
  big.push_back(2);
  EXPECT_FALSE(hier_allgather_fits(group_by_host(identities(big))));
  big.back() = 4;  // 9 x 16
  EXPECT_TRUE(hier_allgather_fits(group_by_host(identities(big))));
  EXPECT_EQ(choose_allgather(hier_mode::on, group_by_host(identities({9 * 64, 2}, false))), c::ring) << "65+ per host";
}

}  // namespace
}  // namespace chorus
