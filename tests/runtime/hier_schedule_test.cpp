// The hierarchical schedules (runtime/collectives/hier_schedule.hpp), checked by symbolic
// simulation as ring_schedule_test does: each element holds the multiset of ranks that
// contributed to it; transfers move and merge those sets as hier_op does (phases open in order,
// frames of a later phase wait, forwards follow receives), delivered in a random order. The end
// state must hold every rank exactly once in every element of every rank. Also: host grouping
// and the algorithm choice.
#include "runtime/collectives/hier_schedule.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using contribution = std::vector<int>;  // times each rank contributed to one element

// Identities for hosts of the given sizes, ranks numbered host after host unless `interleave`.
std::vector<std::string> identities(const std::vector<int>& sizes, bool interleave = false) {
  std::vector<std::string> ids;
  if (!interleave) {
    for (std::size_t h = 0; h < sizes.size(); ++h)
      for (int i = 0; i < sizes[h]; ++i) ids.push_back("host-" + std::to_string(h));
    return ids;
  }
  for (int i = 0, placed = 1; placed;) {
    placed = 0;
    for (std::size_t h = 0; h < sizes.size(); ++h)
      if (i < sizes[h]) ids.push_back("host-" + std::to_string(h)), ++placed;
    ++i;
  }
  return ids;
}

struct message {
  int from, to;
  hier_transfer t;
  std::vector<contribution> data;
};

struct rank_state {
  std::vector<hier_step> steps;
  std::vector<contribution> elems;
  int phase = 0;
  std::vector<std::size_t> left;  // per step
  std::vector<message> held;
};

class simulation {
 public:
  simulation(const host_groups& g, std::size_t count, allreduce_choice v, uint64_t seed) : g_(g), rng_(seed) {
    n_ = static_cast<int>(g.host_of.size());
    for (int r = 0; r < n_; ++r) {
      rank_state s;
      s.steps = v == allreduce_choice::hier_leader ? hier_leader_steps(g, r, count, 1) : hier_sharded_steps(g, r, count, 1);
      s.elems.assign(count, contribution(static_cast<std::size_t>(n_), 0));
      for (auto& e : s.elems) e[static_cast<std::size_t>(r)] = 1;
      for (const auto& st : s.steps) s.left.push_back(st.recv.peer >= 0 ? st.recv.length : 0);
      ranks_.push_back(std::move(s));
    }
  }

  void run() {
    for (int r = 0; r < n_; ++r) open(r);
    while (!queue_.empty()) {
      std::size_t i = rng_() % queue_.size();
      message m = std::move(queue_[i]);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      deliver(std::move(m));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  const rank_state& rank(int r) const { return ranks_[static_cast<std::size_t>(r)]; }

 private:
  void post(int from, const hier_transfer& t) {
    if (t.length == 0) return;
    auto& s = ranks_[static_cast<std::size_t>(from)];
    message m{from, t.peer, t, {s.elems.begin() + static_cast<std::ptrdiff_t>(t.offset),
                                s.elems.begin() + static_cast<std::ptrdiff_t>(t.offset + t.length)}};
    queue_.push_back(std::move(m));
  }

  void open(int r) {
    auto& s = ranks_[static_cast<std::size_t>(r)];
    for (;;) {
      for (const auto& st : s.steps)
        if (st.phase == s.phase && st.send.peer >= 0 && !st.forward) post(r, st.send);
      std::vector<message> now;
      for (auto it = s.held.begin(); it != s.held.end();) {
        if (step_of(r, *it).phase == s.phase) now.push_back(std::move(*it)), it = s.held.erase(it);
        else ++it;
      }
      for (auto& m : now) consume(std::move(m));
      if (!phase_done(r) || s.phase == 3) return;
      if (++s.phase == 3) return;
    }
  }

  bool phase_done(int r) const {
    const auto& s = ranks_[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].phase == s.phase && s.left[i]) return false;
    return true;
  }

  std::size_t index_of(int r, const message& m) const {
    const auto& s = ranks_[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].recv.peer == m.from && s.steps[i].recv.wire == m.t.wire) return i;
    ADD_FAILURE() << "rank " << r << " has no receive for wire " << m.t.wire << " from rank " << m.from;
    return 0;
  }
  const hier_step& step_of(int r, const message& m) const { return rank(r).steps[index_of(r, m)]; }

  void deliver(message m) {
    auto& s = ranks_[static_cast<std::size_t>(m.to)];
    std::size_t i = index_of(m.to, m);
    ASSERT_EQ(s.steps[i].recv.offset, m.t.offset) << "rank " << m.to << " step " << i;
    ASSERT_EQ(s.steps[i].recv.length, m.t.length) << "rank " << m.to << " step " << i;
    ASSERT_EQ(s.left[i], m.t.length) << "rank " << m.to << " step " << i << " received twice";
    if (s.steps[i].phase > s.phase) {
      s.held.push_back(std::move(m));
      return;
    }
    int to = m.to;
    consume(std::move(m));
    if (phase_done(to)) {
      if (++s.phase < 3) open(to);
    }
  }

  void consume(message m) {
    auto& s = ranks_[static_cast<std::size_t>(m.to)];
    std::size_t i = index_of(m.to, m);
    const auto& st = s.steps[i];
    for (std::size_t k = 0; k < m.t.length; ++k) {
      auto& e = s.elems[m.t.offset + k];
      if (st.reduce)
        for (int q = 0; q < n_; ++q) e[static_cast<std::size_t>(q)] += m.data[k][static_cast<std::size_t>(q)];
      else
        e = m.data[k];
    }
    s.left[i] = 0;
    if (i + 1 < s.steps.size() && s.steps[i + 1].forward) {
      ASSERT_EQ(s.steps[i + 1].send.offset, st.recv.offset);
      ASSERT_EQ(s.steps[i + 1].send.length, st.recv.length);
      post(m.to, s.steps[i + 1].send);
    }
  }

  const host_groups& g_;
  std::mt19937_64 rng_;
  int n_ = 0;
  std::vector<rank_state> ranks_;
  std::vector<message> queue_;
};

void expect_everyone_once(const simulation& sim, int n, const std::string& what) {
  for (int r = 0; r < n; ++r) {
    const auto& s = sim.rank(r);
    EXPECT_EQ(s.phase, 3) << what << " rank " << r << " stopped in phase " << s.phase;
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
        for (std::size_t count : {0, 1, 2, 7, 13, 100}) {
          auto g = group_by_host(identities(sizes, interleave));
          std::string what = std::string(name_of(v)) + " " + g.describe() + " count=" + std::to_string(count);
          uint64_t seed = testing::seed_for("hier_schedule_test", count * 131 + sizes.size());
          simulation sim(g, count, v, seed);
          sim.run();
          ASSERT_FALSE(::testing::Test::HasFatalFailure()) << what << " seed " << seed;
          expect_everyone_once(sim, static_cast<int>(g.host_of.size()), what);
        }
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

}  // namespace
}  // namespace chorus
