// The real chunk ops (ring allreduce, recursive doubling, chain broadcast, ring allgather)
// driven by the real engine over the deterministic local fabric: every dtype and reduce_op
// against an independent reference, ranks starting in random orders (early-frame replay),
// several ops in flight, mismatched ops and killed ranks (the fabric's own contract is in
// local_transport_test.cpp).
// Randomised: each test prints its seed; CHORUS_TEST_SEED=<n> re-runs with another base seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/core/half.hpp"
#include "runtime/transport/local/local_transport.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

// ---- seeds (tests/support/test_seed.hpp) -----------------------------------------------------

uint64_t seed_for(uint64_t salt) { return testing::seed_for("collectives_local_test", salt); }

// ---- values and the reference: tests/support/reduce_reference.hpp ---------------------------

using namespace chorus::testing;

// ---- one collective on every rank -------------------------------------------------------------

enum class algo { ring_allreduce, recursive_doubling, broadcast, ring_allgather };
const algo all_algos[] = {algo::ring_allreduce, algo::recursive_doubling, algo::broadcast, algo::ring_allgather};

const char* name_of(algo a) {
  switch (a) {
    case algo::ring_allreduce: return "ring_allreduce";
    case algo::recursive_doubling: return "recursive_doubling";
    case algo::broadcast: return "broadcast";
    case algo::ring_allgather: return "ring_allgather";
  }
  return "?";
}

struct op_spec {
  algo kind = algo::ring_allreduce;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  std::size_t count = 0;          // elements (allgather: rank r contributes count + r % 3)
  std::size_t segment_bytes = 4;
  int root = 0;
  uint64_t sequence = 0;
  int stream = 0;
};

std::string describe(const op_spec& s, int n) {
  return std::string(name_of(s.kind)) + " n=" + std::to_string(n) + " " + std::string(name_of(s.type)) + " " +
         std::string(name_of(s.op)) + " count=" + std::to_string(s.count) + " segment=" +
         std::to_string(s.segment_bytes) + " root=" + std::to_string(s.root) + " seq=" + std::to_string(s.sequence) +
         " stream=" + std::to_string(s.stream);
}

// Every rank's buffer of one op, what it should hold afterwards, and what `done` reported.
struct collective_case {
  op_spec spec;
  int n = 0;
  std::vector<std::vector<std::byte>> buf, expected;
  std::vector<std::vector<std::size_t>> counts;  // allgather: each rank's view of the counts
  std::vector<int> calls;
  std::vector<status> result;

  collective_case(const op_spec& s, int size, std::mt19937_64& rng) : spec(s), n(size), calls(size, 0), result(size) {
    const std::size_t e = size_of(s.type);
    std::vector<std::size_t> c(n, s.count);
    if (s.kind == algo::ring_allgather)
      for (int r = 0; r < n; ++r) c[r] = s.count + r % 3;
    counts.assign(n, c);
    std::size_t total = s.count;
    if (s.kind == algo::ring_allgather) total = std::accumulate(c.begin(), c.end(), std::size_t{0});
    buf.assign(n, std::vector<std::byte>(total * e, std::byte{0xEE}));
    expected.assign(n, std::vector<std::byte>(total * e));
    std::vector<const std::byte*> in;
    for (int r = 0; r < n; ++r) {
      if (s.kind == algo::ring_allgather) {
        std::size_t at = 0;
        for (int b = 0; b < r; ++b) at += c[b];
        fill_input(s.type, s.op, buf[r].data() + at * e, c[r], rng);
        if (c[r]) std::memcpy(expected[0].data() + at * e, buf[r].data() + at * e, c[r] * e);
      } else if (s.kind != algo::broadcast || r == s.root) {
        fill_input(s.type, s.op, buf[r].data(), s.count, rng);
      }
      in.push_back(buf[r].data());
    }
    if (s.kind == algo::broadcast) expected[0] = buf[s.root];
    if (s.kind == algo::ring_allreduce || s.kind == algo::recursive_doubling)
      reference(s.type, s.op, in, expected[0].data(), s.count);
    for (int r = 1; r < n; ++r) expected[r] = expected[0];
  }

  std::unique_ptr<chunk_op> make(int r) {
    const auto& s = spec;
    switch (s.kind) {
      case algo::ring_allreduce:
        return make_ring_allreduce(s.sequence, s.stream, r, n, buf[r].data(), s.count, s.type, s.op, s.segment_bytes);
      case algo::recursive_doubling:
        return std::make_unique<exchange_op>(s.sequence, s.stream, r, n, buf[r].data(), s.count, s.type, s.op);
      case algo::broadcast:
        return std::make_unique<broadcast_op>(s.sequence, s.stream, r, n, buf[r].data(), buf[r].size(), s.root,
                                              s.segment_bytes);
      case algo::ring_allgather:
        return make_ring_allgather(s.sequence, s.stream, r, n, buf[r].data(), counts[r], s.type, s.segment_bytes);
    }
    return nullptr;
  }

  engine::done_fn done(int r) {
    return [this, r](const status& st) {
      ++calls[r];
      result[r] = st;
    };
  }

  // Each rank's done ran exactly once, successfully, and left the expected bytes.
  void expect_success() const {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(describe(spec, n) + " rank=" + std::to_string(r));
      EXPECT_EQ(calls[r], 1);
      EXPECT_TRUE(result[r].ok()) << result[r].to_string();
      if (buf[r] == expected[r]) continue;
      std::size_t e = size_of(spec.type), i = 0;
      while (std::memcmp(buf[r].data() + i * e, expected[r].data() + i * e, e) == 0) ++i;
      ADD_FAILURE() << "element " << i << " differs"
                    << (is_float(spec.type) ? ": got " + std::to_string(load_float(spec.type, buf[r].data(), i)) +
                                                  ", expected " +
                                                  std::to_string(load_float(spec.type, expected[r].data(), i))
                                            : std::string());
    }
  }
};

// ---- ranks on one fabric ----------------------------------------------------------------------

struct cluster {
  cluster(int n, int streams, uint64_t seed, bool threaded = false)
      : fabric(local::fabric_options{n, streams, 0xC0DE, 64u << 20, threaded, local::random_delay(seed, 1000ns)}) {
    for (int r = 0; r < n; ++r) engines.push_back(std::make_unique<engine>(fabric.endpoint(r)));
    for (int r = 0; r < n; ++r) fabric.endpoint(r).start(engines[r].get());
  }
  ~cluster() { fabric.stop(); }  // before the engines go: no task may reach them afterwards
  int size() const { return fabric.size(); }
  void start(collective_case& k, int r) { engines[r]->run(k.make(r), k.done(r)); }

  local::local_fabric fabric;
  std::vector<std::unique_ptr<engine>> engines;
};

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

// ---- failures -----------------------------------------------------------------------------

op_spec failure_spec(algo a, std::size_t count) {
  return op_spec{a, dtype::f32, reduce_op::sum, count, a == algo::broadcast ? 8u : 12u, 0, 77, 0};
}

// One rank runs the op with one more element than the others. Ranks that receive a frame that
// does not fit end with errc::protocol; a rank that expects bytes nobody sends stays pending
// (see undetected_mismatch below). Either way the runtime then gives up on the stuck ranks
// (fail_all, as at shutdown or from a stall inspector) or the failed ranks go away (kill).
class mismatch : public ::testing::TestWithParam<std::tuple<algo, bool, bool>> {};

TEST_P(mismatch, detected_as_protocol_and_nobody_hangs) {
  auto [a, resolve_by_kill, odd_rank_starts_last] = GetParam();
  std::mt19937_64 rng(seed_for(400 + static_cast<uint64_t>(a) * 4 + resolve_by_kill * 2 + odd_rank_starts_last));
  int detected = 0;
  for (int n = 2; n <= 6; ++n) {
    for (int odd = 0; odd < n; ++odd) {
      SCOPED_TRACE(std::string(name_of(a)) + " n=" + std::to_string(n) + " odd rank " + std::to_string(odd));
      cluster c(n, 1, rng());
      collective_case k(failure_spec(a, 7), n, rng);
      collective_case wide(failure_spec(a, 8), n, rng);
      auto start = [&](int r) { c.engines[r]->run((r == odd ? wide : k).make(r), k.done(r)); };
      for (int r = 0; r < n; ++r)
        if (r != odd || !odd_rank_starts_last) start(r);
      c.fabric.run_until_idle();
      if (odd_rank_starts_last) start(odd);
      c.fabric.run_until_idle();

      std::vector<int> failed_or_stuck;
      for (int r = 0; r < n; ++r) {
        if (k.calls[r] == 1 && k.result[r].ok()) continue;
        failed_or_stuck.push_back(r);
        if (k.calls[r] == 0) continue;
        ++detected;
        EXPECT_EQ(k.result[r].code(), errc::protocol) << k.result[r].to_string();
        EXPECT_NE(k.result[r].message().find("chunk 77"), std::string::npos) << k.result[r].message();
      }
      ASSERT_FALSE(failed_or_stuck.empty()) << "every rank succeeded despite the mismatch";
      for (int r : failed_or_stuck) {
        if (resolve_by_kill) c.fabric.kill(r);
        else if (k.calls[r] == 0) c.engines[r]->fail_all(status{errc::shutdown, "test gives up"});
      }
      c.fabric.run_until_idle();
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(k.calls[r], 1) << "rank " << r;
        EXPECT_EQ(c.engines[r]->in_flight(), 0u) << "rank " << r;
      }
    }
  }
  EXPECT_GT(detected, 0) << "no configuration exercised detection";
}

INSTANTIATE_TEST_SUITE_P(algos, mismatch,
                         ::testing::Combine(::testing::ValuesIn(all_algos), ::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(name_of(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_kill" : "_fail_all") +
                                  (std::get<2>(info.param) ? "_odd_last" : "_odd_first");
                         });

class killed_rank : public ::testing::TestWithParam<algo> {};

TEST_P(killed_rank, every_other_rank_ends_with_connection_lost_naming_it) {
  const algo a = GetParam();
  std::mt19937_64 rng(seed_for(500 + static_cast<uint64_t>(a)));
  for (int n : {2, 3, 5, 8, 9}) {
    const int victim = static_cast<int>(rng() % n);
    SCOPED_TRACE(std::string(name_of(a)) + " n=" + std::to_string(n) + " victim " + std::to_string(victim));
    cluster c(n, 2, rng());
    collective_case k(failure_spec(a, 1000), n, rng);
    for (int r = 0; r < n; ++r) c.start(k, r);
    c.fabric.run_until_idle(rng() % (a == algo::recursive_doubling ? 2 : 200));
    for (int r = 0; r < n; ++r) ASSERT_EQ(k.calls[r], 0) << "rank " << r << " finished before the kill";
    c.fabric.kill(victim);
    c.fabric.run_until_idle();
    EXPECT_TRUE(c.fabric.killed(victim));
    const std::string name = "rank " + std::to_string(victim) + " was killed";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(k.calls[r], 1) << "rank " << r;
      EXPECT_EQ(k.result[r].code(), errc::connection_lost) << "rank " << r << ": " << k.result[r].to_string();
      EXPECT_NE(k.result[r].message().find(name), std::string::npos) << k.result[r].message();
    }
    // Later ops fail at once with the same reason.
    const int live = (victim + 1) % n;
    collective_case later(failure_spec(a, 10), n, rng);
    later.spec.sequence = 78;
    c.start(later, live);
    EXPECT_EQ(later.calls[live], 1);
    EXPECT_EQ(later.result[live].code(), errc::connection_lost);
    c.fabric.run_until_idle();
  }
}

INSTANTIATE_TEST_SUITE_P(algos, killed_rank, ::testing::ValuesIn(all_algos),
                         [](const auto& info) { return std::string(name_of(info.param)); });

TEST(threaded_fabric, runs_the_same_ops_on_its_executor_thread) {
  std::mt19937_64 rng(seed_for(600));
  const int n = 5;
  cluster c(n, 2, rng(), /*threaded=*/true);
  std::deque<collective_case> cases;
  for (uint64_t seq = 0; seq < 8; ++seq)
    cases.emplace_back(op_spec{all_algos[seq % 4], dtype::i64, reduce_op::sum, 500, 24, 2, seq, static_cast<int>(seq % 2)},
                       n, rng);
  for (int r = 0; r < n; ++r)
    c.fabric.endpoint(r).post([&, r] {
      for (auto& k : cases) c.start(k, r);
    });
  ASSERT_TRUE(c.fabric.wait_idle(20s));
  for (auto& k : cases) k.expect_success();
}

TEST(threaded_fabric, kill_from_another_thread_ends_every_op_once) {
  std::mt19937_64 rng(seed_for(601));
  const int n = 6;
  cluster c(n, 2, rng(), /*threaded=*/true);
  std::deque<collective_case> cases;
  for (uint64_t seq = 0; seq < 4; ++seq)
    cases.emplace_back(op_spec{all_algos[seq % 4], dtype::f32, reduce_op::sum, 2000, 8, 0, seq, 0}, n, rng);
  for (int r = 0; r < n; ++r)
    c.fabric.endpoint(r).post([&, r] {
      for (auto& k : cases) c.start(k, r);
    });
  c.fabric.kill(3);  // races with the executor on purpose: ops may be anywhere
  ASSERT_TRUE(c.fabric.wait_idle(20s));
  for (auto& k : cases)
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(k.calls[r], 1) << describe(k.spec, n) << " rank " << r;
      if (!k.result[r].ok()) EXPECT_EQ(k.result[r].code(), errc::connection_lost) << k.result[r].to_string();
    }
  for (int r = 0; r < n; ++r) c.fabric.endpoint(r).close(0ms);
}

// ---- problems found in existing code ----------------------------------------------------------

// Regression test for a bug in runtime/collectives/engine.cpp, engine::run: `done` was moved
// into the map entry's temporary before emplace() found the sequence taken, so the duplicate's
// `done` was empty and calling it threw std::bad_function_call instead of reporting
// errc::internal. (Fixed in the tree by checking active_.count(seq) before the move.)
TEST(engine_contract, duplicate_sequence_ends_the_second_op_with_internal) {
  std::mt19937_64 rng(seed_for(700));
  cluster c(2, 1, rng());
  collective_case first(failure_spec(algo::ring_allreduce, 10), 2, rng);
  collective_case dup(failure_spec(algo::ring_allreduce, 10), 2, rng);
  c.start(first, 0);
  EXPECT_NO_THROW(c.start(dup, 0));
  EXPECT_EQ(dup.calls[0], 1);
  EXPECT_EQ(dup.result[0].code(), errc::internal) << dup.result[0].to_string();
  c.start(first, 1);
  c.fabric.run_until_idle();
  first.expect_success();
}

// exchange_op combines partners as (mine op theirs) on both sides, so "all ranks end with
// identical bits" holds only while min/max are bitwise commutative. With kernels that return
// the second operand on a tie (-0 vs +0, as reduce.hpp still documents) the two partners end
// with different zeros; this pins the property (ring ops copy results, so they hold anyway).
class signed_zero : public ::testing::TestWithParam<std::tuple<algo, reduce_op>> {};

TEST_P(signed_zero, min_and_max_leave_identical_bits_on_every_rank) {
  auto [a, op] = GetParam();
  std::mt19937_64 rng(seed_for(800));
  cluster c(2, 1, rng());
  op_spec s{a, dtype::f32, op, 1, 4, 0, 5, 0};
  collective_case k(s, 2, rng);
  store<float>(k.buf[0].data(), 0, -0.0f);
  store<float>(k.buf[1].data(), 0, +0.0f);
  for (int r = 0; r < 2; ++r) c.start(k, r);
  c.fabric.run_until_idle();
  EXPECT_EQ(k.buf[0], k.buf[1]) << "rank 0 holds " << (std::signbit(load<float>(k.buf[0].data(), 0)) ? "-0" : "+0")
                                << ", rank 1 holds " << (std::signbit(load<float>(k.buf[1].data(), 0)) ? "-0" : "+0");
}

INSTANTIATE_TEST_SUITE_P(algos, signed_zero,
                         ::testing::Combine(::testing::Values(algo::ring_allreduce, algo::recursive_doubling),
                                            ::testing::Values(reduce_op::min, reduce_op::max)),
                         [](const auto& info) {
                           return std::string(name_of(std::get<0>(info.param))) + "_" +
                                  std::string(name_of(std::get<1>(info.param)));
                         });

// Regression: frames once carried no chunk size, so when the rank with the larger count held the
// extra bytes in a block it only ever receives, every frame fit both views and it waited forever
// for 4 bytes nobody sends. Frames now carry a layout tag (chunk_op.hpp), and the rank that sees
// a foreign tag aborts the job for everybody. (n=2, counts 8 and 7, 3-float segments.)
TEST(undetected_mismatch, larger_count_on_a_receiving_rank_fails_instead_of_hanging) {
  std::mt19937_64 rng(seed_for(1000));
  cluster c(2, 1, rng());
  collective_case k(failure_spec(algo::ring_allreduce, 7), 2, rng);
  collective_case wide(failure_spec(algo::ring_allreduce, 8), 2, rng);
  c.engines[0]->run(wide.make(0), k.done(0));
  c.start(k, 1);
  c.fabric.run_until_idle();
  EXPECT_EQ(k.calls[0], 1) << "rank 0 (count 8) still waits for bytes nobody sends";
  EXPECT_TRUE(k.result[0].code() == errc::protocol || k.result[1].code() == errc::protocol)
      << "rank 0: " << (k.calls[0] ? k.result[0].to_string() : "pending")
      << "; rank 1: " << (k.calls[1] ? k.result[1].to_string() : "pending");
  for (int r = 0; r < 2; ++r)
    if (k.calls[r] == 0) c.engines[r]->fail_all(status{errc::shutdown, "test gives up"});
  c.fabric.run_until_idle();
}

}  // namespace
}  // namespace chorus
