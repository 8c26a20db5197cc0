// The real chunk ops (ring allreduce, recursive doubling, chain broadcast, ring allgather)
// driven by the real engine over the deterministic local fabric: every dtype and reduce_op
// against an independent reference, ranks starting in random orders (early-frame replay), late
// ranks and the early-frame pool, several ops in flight (the fabric's own contract is in
// local_transport_test.cpp; mismatched ops, killed ranks, the threaded fabric and regressions
// are in collectives_local_failures_test.cpp; the ranks and ops: tests/support/local_collectives.hpp).
// Randomised: each test prints its seed; CHORUS_TEST_SEED=<n> re-runs with another base seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "tests/support/local_collectives.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

// ---- seeds (tests/support/test_seed.hpp) -----------------------------------------------------

uint64_t seed_for(uint64_t salt) { return testing::seed_for("collectives_local_test", salt); }

// ---- values and the reference: tests/support/reduce_reference.hpp ---------------------------

using namespace chorus::testing;

// ---- one collective on every rank, ranks on one fabric: tests/support/local_collectives.hpp ----

// Starts every case on every rank, each rank in its own random order, with a random number of
// executor steps between two starts (frames often reach a rank before its op exists, which
// exercises the engine's early-frame replay), then runs the fabric dry.
void run_cases(cluster& c, const std::vector<collective_case*>& cases, std::mt19937_64& rng) {
  const int n = c.size();
  std::vector<std::vector<collective_case*>> order(n, cases);
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::size_t> next(n, 0);
  for (;;) {
    std::vector<int> ready;
    for (int r = 0; r < n; ++r)
      if (next[r] < cases.size()) ready.push_back(r);
    if (ready.empty()) break;
    int r = ready[rng() % ready.size()];
    c.start(*order[r][next[r]++], r);
    c.fabric.run_until_idle(rng() % 16);
  }
  c.fabric.run_until_idle();
  EXPECT_EQ(c.fabric.queued(), 0u);
  for (int r = 0; r < n; ++r) EXPECT_EQ(c.engines[r]->in_flight(), 0u) << "rank " << r;
}

std::size_t segment_for(std::size_t count, std::size_t elem, std::mt19937_64& rng) {
  // Many segments per block, sometimes not a multiple of the element size (the op rounds down).
  std::size_t elems = count >= 1000 ? 1 + rng() % 8 : 1 + rng() % 2;
  return elems * elem + (rng() % 2 ? rng() % elem : 0);
}

// ---- every dtype x every reduce_op ------------------------------------------------------------

class allreduce_exact : public ::testing::TestWithParam<std::tuple<dtype, reduce_op>> {};

TEST_P(allreduce_exact, every_size_count_and_algorithm) {
  auto [t, op] = GetParam();
  std::mt19937_64 rng(seed_for(static_cast<uint64_t>(t) * 16 + static_cast<uint64_t>(op)));
  for (int n = 1; n <= 9; ++n) {
    cluster c(n, 2, rng());
    std::deque<collective_case> cases;
    uint64_t seq = 0;
    for (std::size_t count : {0, 1, 7, 1000}) {
      for (algo a : {algo::ring_allreduce, algo::recursive_doubling}) {
        op_spec s{a, t, op, count, segment_for(count, size_of(t), rng), 0, seq, static_cast<int>(seq % 2)};
        ++seq;
        cases.emplace_back(s, n, rng);
      }
    }
    std::vector<collective_case*> all;
    for (auto& k : cases) all.push_back(&k);
    run_cases(c, all, rng);
    for (auto& k : cases) k.expect_success();
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes_and_ops, allreduce_exact,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes), ::testing::ValuesIn(all_ops)),
                         [](const auto& info) {
                           return std::string(name_of(std::get<0>(info.param))) + "_" +
                                  std::string(name_of(std::get<1>(info.param)));
                         });

class copy_collectives : public ::testing::TestWithParam<dtype> {};

TEST_P(copy_collectives, broadcast_from_any_root_and_allgatherv) {
  const dtype t = GetParam();
  std::mt19937_64 rng(seed_for(100 + static_cast<uint64_t>(t)));
  for (int n = 1; n <= 9; ++n) {
    cluster c(n, 3, rng());
    std::deque<collective_case> cases;
    uint64_t seq = 1000;
    for (std::size_t count : {0, 1, 7, 1000}) {
      for (algo a : {algo::broadcast, algo::ring_allgather}) {
        op_spec s{a, t, reduce_op::sum, count, segment_for(count, size_of(t), rng), static_cast<int>(rng() % n), seq,
                  static_cast<int>(seq % 3)};
        ++seq;
        cases.emplace_back(s, n, rng);
      }
    }
    std::vector<collective_case*> all;
    for (auto& k : cases) all.push_back(&k);
    run_cases(c, all, rng);
    for (auto& k : cases) k.expect_success();
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, copy_collectives, ::testing::ValuesIn(all_dtypes),
                         [](const auto& info) { return std::string(name_of(info.param)); });

// ---- start order ------------------------------------------------------------------------------

class late_rank : public ::testing::TestWithParam<algo> {};

// One rank starts only after every frame the others could send has arrived: everything it
// receives is replayed from the engine's early frames.
TEST_P(late_rank, receives_everything_early_and_still_completes) {
  std::mt19937_64 rng(seed_for(200 + static_cast<uint64_t>(GetParam())));
  for (int n = 2; n <= 9; ++n) {
    for (int late : {0, n / 2, n - 1}) {
      SCOPED_TRACE("late rank " + std::to_string(late));
      cluster c(n, 1, rng());
      op_spec s{GetParam(), dtype::i32, reduce_op::sum, 100, 8, 1 % n, 7, 0};
      collective_case k(s, n, rng);
      for (int r = 0; r < n; ++r)
        if (r != late) c.start(k, r);
      c.fabric.run_until_idle();
      EXPECT_EQ(k.calls[late], 0);
      c.start(k, late);
      c.fabric.run_until_idle();
      k.expect_success();
    }
  }
}

// A rank that is late step after step: early frames are copied into pooled buffers that the
// next ones reuse (engine::early_pool_bytes). Payloads that shrink and grow from op to op
// land in buffers of other sizes, and each result is still exact.
TEST_P(late_rank, is_late_op_after_op_and_reused_buffers_carry_each_ops_own_bytes) {
  std::mt19937_64 rng(seed_for(250 + static_cast<uint64_t>(GetParam())));
  for (int n : {2, 4}) {
    cluster c(n, 1, rng());
    uint64_t seq = 7;
    for (std::size_t count : {300, 20, 1000, 5, 1000, 64}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " count " + std::to_string(count));
      op_spec s{GetParam(), dtype::i32, reduce_op::sum, count, 4 * (1 + rng() % 40), 1 % n, seq++, 0};
      collective_case k(s, n, rng);
      for (int r = 1; r < n; ++r) c.start(k, r);
      c.fabric.run_until_idle();
      c.start(k, 0);
      c.fabric.run_until_idle();
      k.expect_success();
    }
    // From the second op on, the early frames' buffers came back from the pool.
    auto pool = c.engines[0]->early_buffers();
    EXPECT_GT(pool.reuses, 0u);
    EXPECT_EQ(pool.leased_bytes, 0u);
    EXPECT_LE(pool.allocated_bytes, engine::early_pool_bytes);
  }
}

// More early bytes than the pool holds: the pool fills up to its cap, the rest waits in plain
// memory, and the late rank's result is still exact.
TEST(late_rank_pool, more_early_bytes_than_the_pool_holds_go_to_plain_memory) {
  std::mt19937_64 rng(seed_for(260));
  cluster c(2, 1, rng());
  const std::size_t count = engine::early_pool_bytes / 4 + (512u << 10);  // 66 MiB of i32
  op_spec s{algo::broadcast, dtype::i32, reduce_op::sum, count, 1u << 20, 1, 7, 0};
  collective_case k(s, 2, rng);
  c.start(k, 1);
  c.fabric.run_until_idle();
  auto held = c.engines[0]->early_buffers();
  EXPECT_GE(held.leased_bytes, engine::early_pool_bytes - (1u << 20));
  EXPECT_LE(held.allocated_bytes, engine::early_pool_bytes);
  c.start(k, 0);
  c.fabric.run_until_idle();
  k.expect_success();
  EXPECT_EQ(c.engines[0]->early_buffers().leased_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(algos, late_rank, ::testing::ValuesIn(all_algos),
                         [](const auto& info) { return std::string(name_of(info.param)); });

class many_in_flight : public ::testing::TestWithParam<int> {};

TEST_P(many_in_flight, mixed_ops_on_several_streams_in_random_orders) {
  std::mt19937_64 rng(seed_for(300 + GetParam()));
  const int n = 2 + static_cast<int>(rng() % 8);
  cluster c(n, 3, rng());
  std::deque<collective_case> cases;
  for (uint64_t seq = 0; seq < 12; ++seq) {
    op_spec s{all_algos[rng() % 4], all_dtypes[rng() % std::size(all_dtypes)], all_ops[rng() % 5], rng() % 300, 0,
              static_cast<int>(rng() % n), 1000 + seq * 7, static_cast<int>(rng() % 3)};
    s.segment_bytes = segment_for(s.count, size_of(s.type), rng);
    cases.emplace_back(s, n, rng);
  }
  std::vector<collective_case*> all;
  for (auto& k : cases) all.push_back(&k);
  run_cases(c, all, rng);
  for (auto& k : cases) k.expect_success();
}

INSTANTIATE_TEST_SUITE_P(seeds, many_in_flight, ::testing::Range(0, 12));

}  // namespace
}  // namespace chorus
