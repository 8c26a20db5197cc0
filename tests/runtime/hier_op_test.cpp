// The hierarchical allreduce op (runtime/collectives/hier_op.hpp) driven by the real engine over
// the deterministic local fabric, hosts given by identities: every dtype and reduce_op, sizes
// 0, 1, odd and many segments, even and uneven hosts, ranks starting in random orders (held
// frames and early-frame replay), and a killed rank ending every op with its name; the same for
// the hierarchical allgather (hier_allgather.hpp) with per-rank counts that differ.
// Randomised: each test prints its seed; CHORUS_TEST_SEED=<n> re-runs with another base seed.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/hier_allgather.hpp"
#include "runtime/collectives/hier_op.hpp"
#include "runtime/transport/local/local_transport.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace chorus::testing;
using namespace std::chrono_literals;

uint64_t seed_for(uint64_t salt) { return chorus::testing::seed_for("hier_op_test", salt); }

host_groups hosts_of(const std::vector<int>& sizes) {
  std::vector<std::string> ids;
  for (std::size_t h = 0; h < sizes.size(); ++h)
    for (int i = 0; i < sizes[h]; ++i) ids.push_back("h" + std::to_string(h));
  return group_by_host(ids);
}

std::string show(const std::vector<int>& sizes) {
  std::string s;
  for (int v : sizes) s += (s.empty() ? "" : "+") + std::to_string(v);
  return s;
}

// What every case keeps per rank and checks at the end, for the allreduce and the allgather.
struct case_outcome {
  dtype type;
  int n;
  std::vector<std::vector<std::byte>> buf;
  std::vector<std::byte> expected;
  std::vector<int> calls;
  std::vector<status> result;

  case_outcome(dtype t, int ranks) : type(t), n(ranks), calls(ranks, 0), result(ranks) {}
  engine::done_fn done(int r) {
    return [this, r](const status& st) {
      ++calls[r];
      result[r] = st;
    };
  }
  void expect_success(const std::string& what) const {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(what + " rank " + std::to_string(r));
      EXPECT_EQ(calls[r], 1);
      EXPECT_TRUE(result[r].ok()) << result[r].to_string();
      if (buf[r] == expected) continue;
      std::size_t i = 0;
      while (buf[r][i] == expected[i]) ++i;
      ADD_FAILURE() << "element " << i / size_of(type) << " differs";
    }
  }
  /// Every op ended once; every rank but `victim` with connection_lost naming it.
  void expect_every_survivor_names(int victim) const {
    const std::string name = "rank " + std::to_string(victim) + " was killed";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(calls[r], 1) << "rank " << r;
      if (r == victim) continue;
      EXPECT_EQ(result[r].code(), errc::connection_lost) << "rank " << r << ": " << result[r].to_string();
      EXPECT_NE(result[r].message().find(name), std::string::npos) << result[r].message();
    }
  }
};

struct hier_case : case_outcome {
  host_groups g;
  allreduce_choice variant;
  reduce_op op;
  std::size_t count, segment;
  uint64_t sequence;

  hier_case(host_groups groups, allreduce_choice v, dtype t, reduce_op o, std::size_t c, std::size_t seg,
            uint64_t seq, std::mt19937_64& rng)
      : case_outcome(t, static_cast<int>(groups.host_of.size())), g(std::move(groups)), variant(v), op(o), count(c),
        segment(seg), sequence(seq) {
    const std::size_t e = size_of(t);
    buf.assign(n, std::vector<std::byte>(c * e));
    expected.assign(c * e, std::byte{0});
    std::vector<const std::byte*> in;
    for (int r = 0; r < n; ++r) {
      fill_input(t, o, buf[r].data(), c, rng);
      in.push_back(buf[r].data());
    }
    reference(t, o, in, expected.data(), c);
  }
  std::string what() const {
    return std::string(name_of(variant)) + " " + g.describe() + " " + std::string(name_of(type)) + " " +
           std::string(name_of(op)) + " count=" + std::to_string(count) + " segment=" + std::to_string(segment);
  }
  std::unique_ptr<chunk_op> make(int r) {
    return make_hier_allreduce(sequence, static_cast<int>(sequence % 2), g, r, buf[r].data(), count, type, op, segment,
                               variant);
  }
};

struct cluster {
  cluster(int n, uint64_t seed)
      : fabric(local::fabric_options{n, 2, 0xC0DE, 64u << 20, false, local::random_delay(seed, 1000ns)}) {
    for (int r = 0; r < n; ++r) engines.push_back(std::make_unique<engine>(fabric.endpoint(r)));
    for (int r = 0; r < n; ++r) fabric.endpoint(r).start(engines[r].get());
  }
  ~cluster() { fabric.stop(); }
  local::local_fabric fabric;
  std::vector<std::unique_ptr<engine>> engines;
};

// Every rank starts every case in its own random order, with random fabric progress between.
template <class Case>
void run_all(cluster& c, std::deque<Case>& cases, std::mt19937_64& rng) {
  const int n = static_cast<int>(c.engines.size());
  std::vector<std::vector<Case*>> order(n);
  for (auto& o : order) {
    for (auto& k : cases) o.push_back(&k);
    std::shuffle(o.begin(), o.end(), rng);
  }
  std::vector<std::size_t> next(n, 0);
  for (;;) {
    std::vector<int> ready;
    for (int r = 0; r < n; ++r)
      if (next[r] < cases.size()) ready.push_back(r);
    if (ready.empty()) break;
    int r = ready[rng() % ready.size()];
    auto* k = order[r][next[r]++];
    c.engines[r]->run(k->make(r), k->done(r));
    c.fabric.run_until_idle(rng() % 16);
  }
  c.fabric.run_until_idle();
  EXPECT_EQ(c.fabric.queued(), 0u);
}

const std::vector<std::vector<int>> layouts = {{2, 2}, {2, 1}, {1, 1, 1}, {3, 1, 2}, {2, 2, 2}, {4, 4}};

class hier_exact : public ::testing::TestWithParam<std::tuple<dtype, reduce_op>> {};

TEST_P(hier_exact, both_variants_every_layout_and_size) {
  auto [t, op] = GetParam();
  std::mt19937_64 rng(seed_for(static_cast<uint64_t>(t) * 16 + static_cast<uint64_t>(op)));
  for (const auto& sizes : layouts) {
    SCOPED_TRACE("hosts " + show(sizes));
    auto g = hosts_of(sizes);
    cluster c(static_cast<int>(g.host_of.size()), rng());
    std::deque<hier_case> cases;
    uint64_t seq = 1;
    for (std::size_t count : {0, 1, 7, 1000})
      for (auto v : {allreduce_choice::hier_sharded, allreduce_choice::hier_leader}) {
        std::size_t seg = (count >= 1000 ? 1 + rng() % 16 : 1 + rng() % 2) * size_of(t);
        cases.emplace_back(g, v, t, op, count, seg, seq++, rng);
      }
    run_all(c, cases, rng);
    for (auto& k : cases) k.expect_success(k.what());
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes_and_ops, hier_exact,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes), ::testing::ValuesIn(all_ops)),
                         [](const auto& info) {
                           return std::string(name_of(std::get<0>(info.param))) + "_" +
                                  std::string(name_of(std::get<1>(info.param)));
                         });

TEST(hier_op, a_killed_rank_ends_every_op_on_every_rank_naming_it) {
  std::mt19937_64 rng(seed_for(900));
  for (const auto& sizes : layouts) {
    auto g = hosts_of(sizes);
    const int n = static_cast<int>(g.host_of.size());
    for (auto v : {allreduce_choice::hier_sharded, allreduce_choice::hier_leader}) {
      const int victim = static_cast<int>(rng() % n);
      SCOPED_TRACE(show(sizes) + " " + name_of(v) + " victim " + std::to_string(victim));
      cluster c(n, rng());
      hier_case k(g, v, dtype::f32, reduce_op::sum, 5000, 64, 7, rng);
      for (int r = 0; r < n; ++r) c.engines[r]->run(k.make(r), k.done(r));
      c.fabric.run_until_idle(rng() % 40);
      c.fabric.kill(victim);
      c.fabric.run_until_idle();
      k.expect_every_survivor_names(victim);
    }
  }
}

TEST(hier_op, ranks_running_flat_and_hierarchical_fail_instead_of_waiting) {
  // Two ranks disagree on the algorithm for one sequence: the layout tags differ.
  auto g = hosts_of({2, 2});
  std::mt19937_64 rng(seed_for(901));
  hier_case sharded(g, allreduce_choice::hier_sharded, dtype::f32, reduce_op::sum, 64, 16, 3, rng);
  hier_case leader(g, allreduce_choice::hier_leader, dtype::f32, reduce_op::sum, 64, 16, 3, rng);
  EXPECT_NE(sharded.make(0)->layout_tag(), leader.make(0)->layout_tag());
}

// An allgather(v) of counts[r] elements from rank r: each rank starts with only its block in
// place (the rest holds junk that must be overwritten) and must end with every block.
struct gather_case : case_outcome {
  host_groups g;
  std::vector<std::size_t> counts;
  std::size_t segment;
  uint64_t sequence;
  std::vector<hier_block> blocks;

  gather_case(host_groups groups, dtype t, std::vector<std::size_t> c, std::size_t seg, uint64_t seq,
              std::mt19937_64& rng)
      : case_outcome(t, static_cast<int>(groups.host_of.size())), g(std::move(groups)), counts(std::move(c)),
        segment(seg), sequence(seq) {
    const std::size_t e = size_of(t);
    std::size_t at = 0;
    for (auto k : counts) {
      blocks.push_back({at, k * e});
      at += k * e;
    }
    expected.resize(at);
    for (auto& b : expected) b = static_cast<std::byte>(rng());
    for (int r = 0; r < n; ++r) {
      buf.emplace_back(at, std::byte{0x5a});
      const auto& b = blocks[static_cast<std::size_t>(r)];
      std::memcpy(buf.back().data() + b.offset, expected.data() + b.offset, b.length);
    }
  }
  std::string what() const {
    std::string c;
    for (auto k : counts) c += (c.empty() ? "" : ",") + std::to_string(k);
    return "hier_allgather " + g.describe() + " " + std::string(name_of(type)) + " counts=" + c +
           " segment=" + std::to_string(segment);
  }
  std::unique_ptr<chunk_op> make(int r) {
    return make_hier_allgather(sequence, static_cast<int>(sequence % 2), g, r, buf[r].data(), blocks, type, segment);
  }
};

TEST(hier_allgather_op, every_dtype_layout_and_size_with_varying_counts) {
  std::mt19937_64 rng(seed_for(1000));
  for (const auto& sizes : layouts) {
    SCOPED_TRACE("hosts " + show(sizes));
    auto g = hosts_of(sizes);
    const int n = static_cast<int>(g.host_of.size());
    cluster c(n, rng());
    std::deque<gather_case> cases;
    uint64_t seq = 1;
    for (dtype t : all_dtypes)
      for (int pattern = 0; pattern < 4; ++pattern) {
        // 0 everywhere, 1 each, odd and differing (some 0), many segments.
        std::vector<std::size_t> counts(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r)
          counts[static_cast<std::size_t>(r)] = pattern == 0   ? 0
                                                : pattern == 1 ? 1
                                                : pattern == 2 ? static_cast<std::size_t>((r * 5 + 3) % 7)
                                                               : 700 + static_cast<std::size_t>(r) * 33;
        std::size_t seg = (pattern == 3 ? 1 + rng() % 64 : 1 + rng() % 2) * size_of(t);
        cases.emplace_back(g, t, counts, seg, seq++, rng);
      }
    run_all(c, cases, rng);
    for (auto& k : cases) k.expect_success(k.what());
  }
}

TEST(hier_allgather_op, a_killed_rank_ends_the_op_on_every_rank_naming_it) {
  std::mt19937_64 rng(seed_for(1001));
  for (const auto& sizes : layouts) {
    auto g = hosts_of(sizes);
    const int n = static_cast<int>(g.host_of.size());
    const int victim = static_cast<int>(rng() % n);
    SCOPED_TRACE(show(sizes) + " victim " + std::to_string(victim));
    cluster c(n, rng());
    gather_case k(g, dtype::f32, std::vector<std::size_t>(static_cast<std::size_t>(n), 3000), 64, 7, rng);
    for (int r = 0; r < n; ++r) c.engines[r]->run(k.make(r), k.done(r));
    c.fabric.run_until_idle(rng() % 40);
    c.fabric.kill(victim);
    c.fabric.run_until_idle();
    k.expect_every_survivor_names(victim);
  }
}

}  // namespace
}  // namespace chorus
