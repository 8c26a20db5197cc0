// The hierarchical schedules (runtime/collectives/hier_schedule.hpp) and their gating by
// segment (hier_gate.hpp), checked by symbolic simulation as ring_schedule_test does: each
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

#include "runtime/collectives/hier_gate.hpp"
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

// One frame in flight: `t` is the sender's step transfer, [offset, offset + length) the frame.
struct message {
  int from, to;
  hier_transfer t;
  std::size_t offset, length;
};

struct rank_state {
  std::vector<hier_step> steps;
  std::vector<contribution> elems;
  hier_gate gate;
  std::vector<std::size_t> left;  // per step
  std::vector<std::pair<message, std::vector<contribution>>> held;
  std::vector<message> waiting;  // segments of sends without a receive first
  explicit rank_state(std::vector<hier_step> s) : steps(std::move(s)), gate(steps) {}
};

class simulation {
 public:
  simulation(const host_groups& g, std::size_t count, allreduce_choice v, std::size_t segment, uint64_t seed)
      : g_(g), segment_(segment), rng_(seed) {
    n_ = static_cast<int>(g.host_of.size());
    early_.assign(static_cast<std::size_t>(n_), 0);
    for (int r = 0; r < n_; ++r) {
      rank_state s(v == allreduce_choice::hier_leader ? hier_leader_steps(g, r, count, 1)
                                                      : hier_sharded_steps(g, r, count, 1));
      s.elems.assign(count, contribution(static_cast<std::size_t>(n_), 0));
      for (auto& e : s.elems) e[static_cast<std::size_t>(r)] = 1;
      for (const auto& st : s.steps) {
        s.left.push_back(st.recv.peer >= 0 ? st.recv.length : 0);
        if (st.send.peer >= 0 && !st.forward)
          for (std::size_t d = 0; d < st.send.length; d += segment_)
            s.waiting.push_back({r, st.send.peer, st.send, st.send.offset + d, std::min(segment_, st.send.length - d)});
      }
      ranks_.push_back(std::move(s));
    }
  }

  void run() {
    for (int r = 0; r < n_; ++r) flush(r);
    while (!queue_.empty()) {
      std::size_t i = rng_() % queue_.size();
      message m = queue_[i];
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      deliver(m);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  const rank_state& rank(int r) const { return ranks_[static_cast<std::size_t>(r)]; }
  /// Frames rank r sent while it still expected bytes of an earlier phase.
  int early(int r) const { return early_[static_cast<std::size_t>(r)]; }
  bool idle(int r) const {
    const auto& s = rank(r);
    return s.held.empty() && s.waiting.empty() &&
           std::all_of(s.left.begin(), s.left.end(), [](std::size_t x) { return x == 0; });
  }

 private:
  void post(const message& m) {
    if (!m.length) return;
    queue_.push_back(m);
    // Sent while the sender still expects bytes of an earlier phase: the phases overlap.
    const auto& s = rank(m.from);
    const int phase = phase_of_send(m.from, m.t);
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].phase < phase && s.left[i] > 0) {
        ++early_[static_cast<std::size_t>(m.from)];
        break;
      }
  }
  void send_range(int from, const hier_transfer& t, std::size_t offset, std::size_t length) {
    for (std::size_t d = 0; d < length; d += segment_)
      post({from, t.peer, t, offset + d, std::min(segment_, length - d)});
  }

  // Posts the waiting sends and consumes the held frames whose bytes are ready, until none is.
  void flush(int r) {
    auto& s = ranks_[static_cast<std::size_t>(r)];
    for (bool moved = true; moved;) {
      moved = false;
      for (auto it = s.waiting.begin(); it != s.waiting.end();) {
        if (s.gate.ready(phase_of_send(r, it->t), it->offset, it->length)) {
          post(*it);
          it = s.waiting.erase(it);
        } else {
          ++it;
        }
      }
      for (std::size_t k = 0; k < s.held.size(); ++k) {
        const auto& m = s.held[k].first;
        if (!s.gate.ready(step_of(r, m).phase, m.offset, m.length)) continue;
        auto h = std::move(s.held[k]);
        s.held.erase(s.held.begin() + static_cast<std::ptrdiff_t>(k));
        consume(h.first, h.second);
        moved = true;
        break;
      }
    }
  }

  int phase_of_send(int r, const hier_transfer& t) const {
    for (const auto& st : rank(r).steps)
      if (st.send.peer == t.peer && st.send.wire == t.wire) return st.phase;
    ADD_FAILURE() << "rank " << r << " has no send for wire " << t.wire;
    return 0;
  }

  std::size_t index_of(int r, const message& m) const {
    const auto& s = ranks_[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].recv.peer == m.from && s.steps[i].recv.wire == m.t.wire) return i;
    ADD_FAILURE() << "rank " << r << " has no receive for wire " << m.t.wire << " from rank " << m.from;
    return 0;
  }
  const hier_step& step_of(int r, const message& m) const { return rank(r).steps[index_of(r, m)]; }

  void deliver(const message& m) {
    auto& s = ranks_[static_cast<std::size_t>(m.to)];
    std::size_t i = index_of(m.to, m);
    const auto& st = s.steps[i];
    ASSERT_EQ(st.recv.offset, m.t.offset) << "rank " << m.to << " step " << i;
    ASSERT_EQ(st.recv.length, m.t.length) << "rank " << m.to << " step " << i;
    ASSERT_LE(m.length, s.left[i]) << "rank " << m.to << " step " << i << " received twice";
    s.left[i] -= m.length;
    // The sender's bytes as they are now: the transport reads them until delivery.
    const auto& from = rank(m.from).elems;
    std::vector<contribution> data(from.begin() + static_cast<std::ptrdiff_t>(m.offset),
                                   from.begin() + static_cast<std::ptrdiff_t>(m.offset + m.length));
    if (!s.gate.ready(st.phase, m.offset, m.length)) {
      s.held.emplace_back(m, std::move(data));
      return;
    }
    consume(m, data);
    flush(m.to);
  }

  void consume(const message& m, const std::vector<contribution>& data) {
    auto& s = ranks_[static_cast<std::size_t>(m.to)];
    std::size_t i = index_of(m.to, m);
    const auto& st = s.steps[i];
    for (std::size_t k = 0; k < m.length; ++k) {
      auto& e = s.elems[m.offset + k];
      if (st.reduce)
        for (int q = 0; q < n_; ++q) e[static_cast<std::size_t>(q)] += data[k][static_cast<std::size_t>(q)];
      else
        e = data[k];
    }
    ASSERT_TRUE(s.gate.received(st.phase, m.offset, m.length)) << "rank " << m.to << " step " << i;
    if (i + 1 < s.steps.size() && s.steps[i + 1].forward) {
      ASSERT_EQ(s.steps[i + 1].send.offset, st.recv.offset);
      ASSERT_EQ(s.steps[i + 1].send.length, st.recv.length);
      send_range(m.to, s.steps[i + 1].send, m.offset, m.length);
    }
  }

  const host_groups& g_;
  std::size_t segment_;
  std::mt19937_64 rng_;
  int n_ = 0;
  std::vector<rank_state> ranks_;
  std::vector<message> queue_;
  std::vector<int> early_;
};

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
            simulation sim(g, count, v, segment, seed);
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
  simulation sim(g, 800, allreduce_choice::hier_sharded, 10, seed);
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
