// Re-registration of a tensor name with another spec (Horovod lets a name come back with any
// spec once its previous operation ended), through the scale simulator for both strategies,
// every message through the codec: ranks that all use the new spec agree on it (an id the same
// on every rank, often a retired one handed out again; the old one retired); a rank that
// enqueues the old spec (by id) while another announces a new one ends with the same mismatch
// error on every rank, naming the tensor and which ranks had which value — never a stall.
// Randomised: the seed is printed; CHORUS_TEST_SEED re-runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/negotiation/diagnostics.hpp"
#include "runtime/negotiation/gossip.hpp"
#include "runtime/negotiation/simulator.hpp"
#include "tests/support/negotiation_sim.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus::negotiation {
namespace {

using namespace std::chrono_literals;

tensor_spec spec(std::string name, std::vector<int64_t> shape, dtype type = dtype::f32,
                 reduce_op op = reduce_op::sum) {
  return chorus::testing::spec(std::move(name), std::move(shape), type, collective_kind::allreduce, op);
}

std::unique_ptr<simulator> make_sim(const std::string& strategy, int n, uint64_t seed) {
  negotiation_options nego;
  nego.cycle_time = 100us;
  return chorus::testing::make_sim(strategy, n, seed, nego);
}

/// What each rank recorded so far, to look at one step's part only.
struct mark {
  std::vector<std::size_t> batches, errors, assigned;
  explicit mark(simulator& sim) {
    for (int r = 0; r < sim.size(); ++r) {
      batches.push_back(sim.record(r).batches.size());
      errors.push_back(sim.record(r).errors.size());
      assigned.push_back(sim.record(r).assigned.size());
    }
  }
};

/// The names agreed on `rank` since `m`, sorted; each looked up right after the call that
/// reported its batch, as the negotiator actor does (ids are handed out again later).
std::vector<std::string> agreed_since(simulator& sim, const mark& m, int rank) {
  std::vector<std::string> out;
  const auto& names = sim.record(rank).batch_names;
  for (std::size_t i = m.batches[static_cast<std::size_t>(rank)]; i < names.size(); ++i)
    out.insert(out.end(), names[i].begin(), names[i].end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<spec_error> errors_since(simulator& sim, const mark& m, int rank) {
  const auto& e = sim.record(rank).errors;
  return {e.begin() + static_cast<std::ptrdiff_t>(m.errors[static_cast<std::size_t>(rank)]), e.end()};
}

/// Every rank enqueues every spec of `step[rank]`, in its own random order, with random gaps
/// in which messages fly; then runs until idle.
void run_step(simulator& sim, const std::vector<std::vector<tensor_spec>>& step, std::mt19937_64& rng) {
  int n = sim.size();
  auto order = step;
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::size_t> next(static_cast<std::size_t>(n), 0);
  std::size_t left = 0;
  for (const auto& o : order) left += o.size();
  for (; left > 0; --left) {
    int r = static_cast<int>(rng() % static_cast<uint64_t>(n));
    while (next[static_cast<std::size_t>(r)] == order[static_cast<std::size_t>(r)].size()) r = (r + 1) % n;
    sim.enqueue(r, order[static_cast<std::size_t>(r)][next[static_cast<std::size_t>(r)]++]);
    sim.run_for(std::chrono::microseconds(rng() % 150));
  }
  ASSERT_TRUE(sim.run_until_idle()) << "negotiation did not finish (a stall)";
}

std::vector<std::vector<tensor_spec>> same_on_every_rank(int n, const std::vector<tensor_spec>& specs) {
  return std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), specs);
}

/// Every rank has the same registry: the same current id and spec for every name in `names`.
void expect_same_registry(simulator& sim, const std::vector<tensor_spec>& current) {
  const auto& reg0 = sim.strategy(0).registry();
  for (int r = 0; r < sim.size(); ++r) {
    const auto& stale = sim.record(r).stale_lookups;
    EXPECT_TRUE(stale.empty()) << "rank " << r << ": " << stale.front();
    const auto& reg = sim.strategy(r).registry();
    ASSERT_EQ(reg.size(), reg0.size()) << "rank " << r;
    EXPECT_EQ(reg.retired_count(), reg0.retired_count()) << "rank " << r;
    EXPECT_EQ(reg.reused_count(), reg0.reused_count()) << "rank " << r;
    for (uint32_t id = 0; id < reg.size(); ++id) {
      EXPECT_EQ(reg.retired(id), reg0.retired(id)) << "id " << id << " on rank " << r;
      if (!reg.retired(id)) {
        EXPECT_EQ(reg.spec(id), reg0.spec(id)) << "id " << id << " on rank " << r;
      }
    }
    for (const auto& s : current) {
      auto id = reg.find(s.name);
      ASSERT_TRUE(id) << s.name << " on rank " << r;
      EXPECT_EQ(*id, *reg0.find(s.name)) << s.name << " on rank " << r;
      EXPECT_EQ(reg.spec(*id), s) << s.name << " on rank " << r;
      EXPECT_FALSE(reg.retired(*id));
    }
  }
}

// (strategy, N): `rename` runs for N = 1..5, `rename_disagreement` for N = 2..5 (its tests need
// a second rank) and `rename_late_rank` for N = 3..5.
class rename : public ::testing::TestWithParam<std::tuple<std::string, int>> {};
class rename_disagreement : public rename {};
class rename_late_rank : public rename {};

// A model whose tensors change shape, dtype or op from step to step (and come back), every
// rank alike: every step agrees every tensor on every rank, with identical ids.
TEST_P(rename, a_name_comes_back_with_another_spec_on_every_rank) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_rename_test", 100 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) names.push_back("t" + std::to_string(i));
  std::vector<std::size_t> retired_before;
  for (int step = 0; step < 8; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<tensor_spec> specs;
    for (std::size_t i = 0; i < names.size(); ++i) {
      // t0 keeps its spec; t1 changes shape every step; t2 alternates between two shapes;
      // t3 changes dtype every third step; t4 changes op; t5 changes rank (number of dims).
      auto s = spec(names[i], {4, 8});
      if (i == 1) s.shape = {step + 1};
      if (i == 2) s.shape = {step % 2 ? 3 : 5};
      if (i == 3 && step % 3 == 2) s.type = dtype::f64;
      if (i == 4) s.op = step % 2 ? reduce_op::max : reduce_op::sum;
      if (i == 5) s.shape = step % 4 < 2 ? std::vector<int64_t>{6} : std::vector<int64_t>{2, 3};
      specs.push_back(s);
    }
    mark m(*sim);
    run_step(*sim, same_on_every_rank(n, specs), rng);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(sim->divergence(), "");
    auto want = names;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(agreed_since(*sim, m, r), want) << "rank " << r;
      EXPECT_TRUE(errors_since(*sim, m, r).empty()) << "rank " << r;
      EXPECT_TRUE(sim->record(r).rejected.empty()) << "rank " << r;
      EXPECT_TRUE(sim->record(r).warnings.empty()) << "rank " << r;
      EXPECT_FALSE(sim->record(r).fatal);
    }
    expect_same_registry(*sim, specs);
    // The ids assigned this step are the same on every rank, in the same order.
    for (int r = 1; r < n; ++r) {
      const auto& a = sim->record(r).assigned;
      const auto& a0 = sim->record(0).assigned;
      ASSERT_EQ(a.size() - m.assigned[static_cast<std::size_t>(r)], a0.size() - m.assigned[0]);
      for (std::size_t i = m.assigned[static_cast<std::size_t>(r)], j = m.assigned[0]; i < a.size(); ++i, ++j) {
        EXPECT_EQ(a[i].name, a0[j].name);
        EXPECT_EQ(a[i].id, a0[j].id);
        EXPECT_EQ(a[i].spec, a0[j].spec);
      }
    }
  }
  // Every change of spec retired one id: t1 7, t2 7, t3 4 (steps 2, 3, 5, 6), t4 7, t5 3. The
  // retired ids were handed out again: the range is bounded by the live names and the ids
  // waiting out their reuse delay, far below one id per registration (6 + 28).
  const auto& reg = sim->strategy(0).registry();
  EXPECT_EQ(reg.retired_count(), 28u);
  EXPECT_GT(reg.reused_count(), 0u);
  EXPECT_LE(reg.size(), names.size() * (1 + tensor_registry::reuse_delay));
}

// The ranks disagree about the next operation on a registered name: rank `changer` announces a
// new shape, the others enqueue the registered one (by id), in every interleaving. Every rank
// ends with the same mismatch error, nothing stalls, and the name is usable again afterwards.
TEST_P(rename_disagreement, old_spec_by_id_against_a_new_spec_is_a_mismatch_on_every_rank) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_rename_test", 200 + static_cast<uint64_t>(n)));
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    auto sim = make_sim(strategy, n, rng());
    auto old_spec = spec("x", {3});
    auto new_spec = spec("x", {4});
    run_step(*sim, same_on_every_rank(n, {old_spec, spec("other", {2})}), rng);
    if (::testing::Test::HasFatalFailure()) return;
    const int changer = static_cast<int>(rng() % static_cast<uint64_t>(n));
    auto step = same_on_every_rank(n, {old_spec, spec("other", {2})});
    step[static_cast<std::size_t>(changer)][0] = new_spec;
    mark m(*sim);
    // Trials 0-3: the changer first / last / at the same time as the rest; then random.
    if (trial < 3) {
      auto t0 = sim->now();
      for (int r = 0; r < n; ++r) {
        bool first = r == changer;
        if (trial == 1) first = !first;
        if (first || trial == 2) sim->enqueue(r, step[static_cast<std::size_t>(r)][0]);
      }
      if (trial != 2) sim->run_for(2ms);  // the first group's cycles are done
      for (int r = 0; r < n; ++r) {
        bool first = r == changer;
        if (trial == 1) first = !first;
        if (!first && trial != 2) sim->enqueue(r, step[static_cast<std::size_t>(r)][0]);
        sim->enqueue(r, step[static_cast<std::size_t>(r)][1]);
      }
      ASSERT_TRUE(sim->run_until_idle()) << "negotiation did not finish (a stall) after " << (sim->now() - t0).count();
    } else {
      run_step(*sim, step, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(sim->divergence(), "");
    dynamic_bitmap old_ranks = complement(dynamic_bitmap(static_cast<std::size_t>(n)), n);
    old_ranks.reset(static_cast<std::size_t>(changer));
    dynamic_bitmap new_ranks;
    new_ranks.set(static_cast<std::size_t>(changer));
    // The larger group is the reference; on a tie (two ranks) the one with the lower rank.
    bool new_is_ref = n == 2 && changer == 0;
    std::string want = "allreduce('x'): shape " +
                       (new_is_ref ? "[3] on " + format_ranks(old_ranks) + " but [4] on " + format_ranks(new_ranks)
                                   : "[4] on " + format_ranks(new_ranks) + " but [3] on " + format_ranks(old_ranks));
    for (int r = 0; r < n; ++r) {
      auto errs = errors_since(*sim, m, r);
      ASSERT_EQ(errs.size(), 1u) << "rank " << r;
      EXPECT_EQ(errs[0].name, "x");
      EXPECT_EQ(errs[0].message, want) << "rank " << r;
      EXPECT_EQ(agreed_since(*sim, m, r), std::vector<std::string>{"other"}) << "rank " << r;
      EXPECT_TRUE(sim->record(r).warnings.empty());
      EXPECT_TRUE(sim->record(r).rejected.empty());
      EXPECT_FALSE(sim->record(r).fatal);
    }
    // The name keeps its old registration after the error, and works with either spec next.
    expect_same_registry(*sim, {old_spec});
    mark after(*sim);
    run_step(*sim, same_on_every_rank(n, {trial % 2 ? new_spec : old_spec}), rng);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(agreed_since(*sim, after, r), std::vector<std::string>{"x"}) << "rank " << r;
      EXPECT_TRUE(errors_since(*sim, after, r).empty());
    }
    expect_same_registry(*sim, {trial % 2 ? new_spec : old_spec});
    EXPECT_EQ(sim->divergence(), "");
  }
}

// Histories that differ from the first use on: rank 0 uses x with [3] then [4], the others
// use x with [4] twice. The first round is a mismatch on every rank; the second agrees.
TEST_P(rename_disagreement, different_histories_meet_again_after_the_mismatch) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_rename_test", 300 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  auto first = same_on_every_rank(n, {spec("x", {4})});
  first[0][0] = spec("x", {3});
  mark m(*sim);
  run_step(*sim, first, rng);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < n; ++r) {
    auto errs = errors_since(*sim, m, r);
    ASSERT_EQ(errs.size(), 1u) << "rank " << r;
    EXPECT_EQ(errs[0].message, errors_since(*sim, m, 0)[0].message);
    EXPECT_NE(errs[0].message.find("allreduce('x'): shape"), std::string::npos) << errs[0].message;
  }
  mark m2(*sim);
  run_step(*sim, same_on_every_rank(n, {spec("x", {4})}), rng);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed_since(*sim, m2, r), std::vector<std::string>{"x"}) << "rank " << r;
    EXPECT_TRUE(errors_since(*sim, m2, r).empty());
  }
  EXPECT_EQ(sim->divergence(), "");
}

// Three or more ranks: the rank that has not produced x yet decides. Until it does, nothing is
// decided (a rank that is merely late is not an error); then the mismatch names every group.
TEST_P(rename_late_rank, a_late_rank_completes_the_disagreement) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_rename_test", 400 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  run_step(*sim, same_on_every_rank(n, {spec("x", {3})}), rng);
  if (::testing::Test::HasFatalFailure()) return;
  mark m(*sim);
  // Rank 0: the new shape; rank 1: the old one; the rest later, with the new one.
  sim->enqueue(0, spec("x", {4}));
  sim->enqueue(1, spec("x", {3}));
  sim->run_for(5ms);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(errors_since(*sim, m, r).empty()) << "rank " << r;
  for (int r = 2; r < n; ++r) sim->enqueue(r, spec("x", {4}));
  ASSERT_TRUE(sim->run_until_idle());
  std::string want = "allreduce('x'): shape [3] on rank 1 but [4] on ranks 0," + std::to_string(2) +
                     (n > 3 ? "-" + std::to_string(n - 1) : "");
  for (int r = 0; r < n; ++r) {
    auto errs = errors_since(*sim, m, r);
    ASSERT_EQ(errs.size(), 1u) << "rank " << r;
    EXPECT_EQ(errs[0].message, want);
  }
  EXPECT_EQ(sim->divergence(), "");
}

// A joined rank counts as having announced every name: the others re-register a name without
// it, and its registry follows.
TEST_P(rename_disagreement, a_joined_rank_follows_a_re_registration) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_rename_test", 500 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  run_step(*sim, same_on_every_rank(n, {spec("x", {3})}), rng);
  if (::testing::Test::HasFatalFailure()) return;
  sim->request_join(n - 1);
  ASSERT_TRUE(sim->run_until_idle());
  auto step = same_on_every_rank(n - 1, {spec("x", {5})});
  step.push_back({});
  mark m(*sim);
  run_step(*sim, step, rng);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed_since(*sim, m, r), std::vector<std::string>{"x"}) << "rank " << r;
    EXPECT_TRUE(errors_since(*sim, m, r).empty());
  }
  expect_same_registry(*sim, {spec("x", {5})});
  EXPECT_EQ(sim->divergence(), "");
}

std::string param_name(const ::testing::TestParamInfo<rename::ParamType>& info) {
  return std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(negotiation, rename,
                         ::testing::Combine(::testing::Values("gossip", "central"), ::testing::Range(1, 6)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(negotiation, rename_disagreement,
                         ::testing::Combine(::testing::Values("gossip", "central"), ::testing::Range(2, 6)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(negotiation, rename_late_rank,
                         ::testing::Combine(::testing::Values("gossip", "central"), ::testing::Range(3, 6)),
                         param_name);

// One rank, no messages: the local rules. A name with another spec while its previous operation
// is still pending here is refused at once; once that one is agreed, the new spec registers.
TEST(rename_local, a_new_spec_while_the_name_is_pending_here_is_refused_at_once) {
  time_point t{};
  gossip_negotiator two(0, 2, negotiation_options{});
  EXPECT_TRUE(two.local_ready(spec("w", {2}), t).rejected.empty());
  auto again = two.local_ready(spec("w", {3}), t + 1ms).rejected;
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].name, "w");
  EXPECT_EQ(again[0].error.code(), errc::invalid_argument);
  EXPECT_EQ(again[0].error.message(),
            "allreduce('w'): enqueued again before the previous operation on this name was agreed");

  gossip_negotiator one(0, 1, negotiation_options{});
  auto a = one.local_ready(spec("w", {2}), t);
  ASSERT_EQ(a.batches.size(), 1u);
  ASSERT_EQ(a.assigned.size(), 1u);
  EXPECT_EQ(a.assigned[0].id, 0u);
  a = one.local_ready(spec("w", {3}), t + 1s);
  EXPECT_TRUE(a.rejected.empty());
  ASSERT_EQ(a.assigned.size(), 1u);
  EXPECT_EQ(a.assigned[0].id, 1u);
  EXPECT_EQ(a.assigned[0].spec.shape, (std::vector<int64_t>{3}));
  ASSERT_EQ(a.batches.size(), 1u);
  EXPECT_EQ(a.batches[0].ids, std::vector<uint32_t>{1});
  EXPECT_TRUE(one.registry().retired(0));
  EXPECT_EQ(one.registry().spec(0).shape, (std::vector<int64_t>{2}));  // a retired id keeps its spec
  EXPECT_EQ(*one.registry().find("w"), 1u);
  // The registered spec again: one bit, no new id.
  a = one.local_ready(spec("w", {3}), t + 2s);
  EXPECT_TRUE(a.assigned.empty());
  ASSERT_EQ(a.batches.size(), 1u);
  EXPECT_EQ(a.batches[0].ids, std::vector<uint32_t>{1});
}

}  // namespace
}  // namespace chorus::negotiation
