// Reuse of retired tensor ids (runtime/negotiation/registry.hpp): a name re-registered again
// and again (broadcast_object under one name every epoch, with another payload size each time)
// keeps the id range and every gossip message bounded, and every rank hands out the same ids
// for the same names, for both strategies and N = 1..5, with names that change spec on every
// rank, on some ranks only (mismatch) and on a late rank; and the registry's reuse rules on
// their own. Through the scale simulator with every message through the codec; batches are
// read by name right after the call that reported them, as the negotiator actor reads them.
// Randomised: the seed is printed; CHORUS_TEST_SEED re-runs it. Transient names
// (tensor_spec::transient, chorus.torch's unnamed ops) retire at the end of the cycle that
// agrees them: a fresh one every step keeps the range bounded too, ranks that disagree about
// the flag get a mismatch. Beside a joined rank: negotiation_id_reuse_join_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/negotiation/registry.hpp"
#include "runtime/negotiation/simulator.hpp"
#include "tests/support/id_reuse_sim.hpp"
#include "tests/support/negotiation_sim.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus::negotiation {
namespace {

using chorus::testing::spec;
using namespace id_reuse_sim;

// broadcast_object(obj, name='state') every epoch, as chorus.torch does it: 'state.sz' (one
// i64, the same spec every time) and 'state.t' (u8 bytes, another length every epoch, so
// re-registered every epoch), 1000 epochs. The id range stays at the live names plus the ids
// waiting out their reuse delay, and so does every message: the largest message of the whole
// run is no larger than the largest of the first 20 epochs, give or take a few bytes of
// varints (the cycle number, the payload length). Without reuse the range is 1001 ids and
// every bitmap in every message carries 1000 bits.
TEST_P(id_reuse, a_name_re_registered_every_epoch_keeps_ids_and_messages_bounded) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_id_reuse_test", 100 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  auto size_spec = spec("state.sz", {1}, dtype::i64, collective_kind::broadcast, reduce_op::sum, 0);
  std::size_t largest_early = 0;
  int64_t previous_length = -1;
  for (int epoch = 0; epoch < 1000; ++epoch) {
    int64_t length = 100 + static_cast<int64_t>(rng() % 900);
    if (length == previous_length) ++length;
    previous_length = length;
    auto bytes = spec("state.t", {length}, dtype::u8, collective_kind::broadcast, reduce_op::sum, 0);
    std::vector<std::size_t> before;
    for (int r = 0; r < n; ++r) before.push_back(sim->record(r).batch_names.size());
    run_step(*sim, std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), {size_spec, bytes}), rng);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(agreed_since(*sim, before[static_cast<std::size_t>(r)], r),
                (std::vector<std::string>{"state.sz", "state.t"}))
          << "epoch " << epoch << " rank " << r;
      const auto& reg = sim->strategy(r).registry();
      ASSERT_LE(reg.size(), 2 + delay) << "epoch " << epoch << " rank " << r;
      ASSERT_EQ(reg.spec(*reg.find("state.t")), bytes) << "epoch " << epoch << " rank " << r;
    }
    if (epoch < 20)
      for (int r = 0; r < n; ++r) largest_early = std::max(largest_early, sim->record(r).largest_message_bytes);
  }
  EXPECT_EQ(sim->divergence(), "");
  expect_identical_registries(*sim);
  const auto& reg = sim->strategy(0).registry();
  EXPECT_EQ(reg.retired_count(), 999u);
  EXPECT_EQ(reg.live_count(), 2u);
  EXPECT_GE(reg.reused_count(), 999u - delay);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(sim->record(r).errors.empty());
    EXPECT_TRUE(sim->record(r).rejected.empty());
    EXPECT_FALSE(sim->record(r).fatal);
    if (n > 1) {
      EXPECT_LE(sim->record(r).largest_message_bytes, largest_early + 4) << "rank " << r;
    }
  }
}

// Random histories of five names over 60 steps: each step, each name keeps its spec, changes
// it on every rank (re-registration, often onto a reused id), or (N >= 2) changes it on some
// ranks only (a mismatch on every rank, the registration unchanged); now and then one rank is
// late with everything. Every rank agrees the same names under the same ids, reports the same
// errors, and the id range stays within the live names plus what waits out the delay.
TEST_P(id_reuse, random_re_registrations_and_mismatches_give_identical_ids_on_every_rank) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_id_reuse_test", 200 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  const std::vector<std::string> names{"a", "b", "c", "d", "e"};
  std::map<std::string, tensor_spec> registered;  // what the registry must hold
  auto random_spec = [&](const std::string& name) {
    auto s = spec(name, {1 + static_cast<int64_t>(rng() % 4)});
    if (rng() % 4 == 0) s.type = dtype::f64;
    if (rng() % 4 == 0) s.op = reduce_op::max;
    return s;
  };
  for (int step = 0; step < 60; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<std::vector<tensor_spec>> specs(static_cast<std::size_t>(n));
    std::vector<std::string> want_agreed, want_errors;
    std::map<std::string, tensor_spec> next = registered;
    for (const auto& name : names) {
      auto it = registered.find(name);
      int what = static_cast<int>(rng() % 3);  // 0 keep, 1 change everywhere, 2 disagree
      if (it == registered.end() && what == 0) what = 1;
      if (n == 1 && what == 2) what = 1;
      auto common = what == 0 ? it->second : random_spec(name);
      if (what != 0 && it != registered.end() && common == it->second) common.shape.push_back(2);
      std::vector<tensor_spec> per_rank(static_cast<std::size_t>(n), common);
      if (what == 2) {
        // Some ranks (not all, not none) use another spec: the registered one (by id) or a new one.
        auto other = it != registered.end() && rng() % 2 ? it->second : random_spec(name);
        if (other == common) other.shape.push_back(3);
        int changed = 1 + static_cast<int>(rng() % static_cast<uint64_t>(n - 1));
        std::vector<int> ranks(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)] = r;
        std::shuffle(ranks.begin(), ranks.end(), rng);
        for (int k = 0; k < changed; ++k) per_rank[static_cast<std::size_t>(ranks[static_cast<std::size_t>(k)])] = other;
        want_errors.push_back(name);
      } else {
        want_agreed.push_back(name);
        next[name] = common;
      }
      for (int r = 0; r < n; ++r) specs[static_cast<std::size_t>(r)].push_back(per_rank[static_cast<std::size_t>(r)]);
    }
    std::vector<std::size_t> batches_before, errors_before;
    for (int r = 0; r < n; ++r) {
      batches_before.push_back(sim->record(r).batch_names.size());
      errors_before.push_back(sim->record(r).errors.size());
    }
    int late = n > 1 && rng() % 4 == 0 ? static_cast<int>(rng() % static_cast<uint64_t>(n)) : -1;
    run_step(*sim, specs, rng, late);
    if (::testing::Test::HasFatalFailure()) return;
    registered = next;
    ASSERT_EQ(sim->divergence(), "");
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(agreed_since(*sim, batches_before[static_cast<std::size_t>(r)], r), want_agreed) << "rank " << r;
      std::vector<std::string> errors;
      const auto& e = sim->record(r).errors;
      for (std::size_t i = errors_before[static_cast<std::size_t>(r)]; i < e.size(); ++i) errors.push_back(e[i].name);
      std::sort(errors.begin(), errors.end());
      EXPECT_EQ(errors, want_errors) << "rank " << r;
      EXPECT_TRUE(sim->record(r).rejected.empty());
      EXPECT_TRUE(sim->record(r).warnings.empty());
      EXPECT_FALSE(sim->record(r).fatal);
      const auto& reg = sim->strategy(r).registry();
      EXPECT_LE(reg.size(), names.size() * (1 + delay)) << "rank " << r;
      for (const auto& [name, s] : registered) {
        auto id = reg.find(name);
        ASSERT_TRUE(id) << name << " on rank " << r;
        EXPECT_EQ(reg.spec(*id), s) << name << " on rank " << r;
      }
    }
    expect_identical_registries(*sim);
  }
  EXPECT_GT(sim->strategy(0).registry().reused_count(), 0u);
}

// hvd.allreduce(loss) without a name every step, as chorus.torch names it: a fresh
// "allreduce.noname.<handle>" per step, marked transient, beside a named gradient. 1000 steps,
// now and then one rank late. A transient name's id is retired at the end of the cycle that
// agrees it and handed out again after the reuse delay, so the id range stays at the live
// names plus the transient ids of the last cycles, and so does every message. Without the
// retirement the range is 1001 ids and every bitmap carries 1000 bits. Every 100 steps an old
// transient name comes back (against the contract): it registers anew and is agreed as usual.
TEST_P(id_reuse, one_transient_name_per_step_keeps_ids_and_messages_bounded) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_id_reuse_test", 400 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  auto grad = spec("grad", {64});
  std::size_t largest_early = 0;
  for (int step = 0; step < 1000; ++step) {
    auto name = "allreduce.noname." + std::to_string(step);
    if (step % 100 == 99) name = "allreduce.noname." + std::to_string(step - 50);  // comes back
    auto loss = transient_spec(name, {1});
    std::vector<std::size_t> before;
    for (int r = 0; r < n; ++r) before.push_back(sim->record(r).batch_names.size());
    int late = n > 1 && rng() % 8 == 0 ? static_cast<int>(rng() % static_cast<uint64_t>(n)) : -1;
    run_step(*sim, std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), {grad, loss}), rng, late);
    if (::testing::Test::HasFatalFailure()) return;
    auto want = std::vector<std::string>{"grad", name};
    std::sort(want.begin(), want.end());
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(agreed_since(*sim, before[static_cast<std::size_t>(r)], r), want) << "step " << step << " rank " << r;
      const auto& reg = sim->strategy(r).registry();
      ASSERT_LE(reg.size(), 2 + delay) << "step " << step << " rank " << r;
      ASSERT_EQ(reg.live_count(), 1u) << "step " << step << " rank " << r;
      ASSERT_FALSE(reg.find(name)) << "step " << step << " rank " << r;
    }
    if (step < 20)
      for (int r = 0; r < n; ++r) largest_early = std::max(largest_early, sim->record(r).largest_message_bytes);
  }
  EXPECT_EQ(sim->divergence(), "");
  expect_identical_registries(*sim);
  expect_identical_assignments(*sim);
  const auto& reg = sim->strategy(0).registry();
  EXPECT_EQ(reg.retired_count(), 1000u);
  EXPECT_GE(reg.reused_count(), 1000u - 2 * delay);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(sim->record(r).errors.empty()) << "rank " << r;
    EXPECT_TRUE(sim->record(r).rejected.empty()) << "rank " << r;
    EXPECT_TRUE(sim->record(r).warnings.empty()) << "rank " << r;
    EXPECT_FALSE(sim->record(r).fatal) << "rank " << r;
    if (n > 1) {
      EXPECT_LE(sim->record(r).largest_message_bytes, largest_early + 4) << "rank " << r;
    }
  }
}

// Ranks that disagree about whether an operation is transient: the usual mismatch error,
// identical on every rank, naming the tensor, the field and the ranks; both for a first
// appearance and for a name registered (not transient) whose next operation some ranks mark
// transient. The name is usable afterwards.
TEST_P(id_reuse, a_transient_disagreement_is_a_mismatch_on_every_rank) {
  auto [strategy, n] = GetParam();
  std::mt19937_64 rng(chorus::testing::seed_for("negotiation_id_reuse_test", 500 + static_cast<uint64_t>(n)));
  auto sim = make_sim(strategy, n, rng());
  auto plain = spec("z", {2});
  auto once = transient_spec("z", {2});
  // The larger group is the reference (of two equal ones, the one with the lower spec).
  auto want = n == 2 ? std::string("allreduce('z'): transient false on rank 1 but true on rank 0")
                     : "allreduce('z'): transient true on rank 0 but false on ranks 1-" + std::to_string(n - 1);
  // (N = 1: no disagreement possible; only step 3.)
  std::size_t want_errors = n > 1 ? 2 : 0;
  if (n > 1) {
    // 1. First appearance: rank 0 transient, the others not.
    std::vector<std::vector<tensor_spec>> specs(static_cast<std::size_t>(n), {plain});
    specs[0] = {once};
    run_step(*sim, specs, rng);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r) {
      const auto& e = sim->record(r).errors;
      ASSERT_EQ(e.size(), 1u) << "rank " << r;
      EXPECT_EQ(e[0].name, "z");
      EXPECT_EQ(e[0].message, want) << "rank " << r;
    }
    // 2. z registered, not transient; then rank 0 marks its next operation transient, the
    //    others enqueue the registered spec (one bit): a mismatch again.
    run_step(*sim, std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), {plain}), rng);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r) ASSERT_TRUE(sim->strategy(r).registry().find("z")) << "rank " << r;
    run_step(*sim, specs, rng);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r) {
      const auto& e = sim->record(r).errors;
      ASSERT_EQ(e.size(), 2u) << "rank " << r;
      EXPECT_EQ(e[1].message, want) << "rank " << r;
    }
  }
  // 3. Every rank marks it transient: agreed, and z leaves the registry.
  std::vector<std::size_t> before;
  for (int r = 0; r < n; ++r) before.push_back(sim->record(r).batch_names.size());
  run_step(*sim, std::vector<std::vector<tensor_spec>>(static_cast<std::size_t>(n), {once}), rng);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed_since(*sim, before[static_cast<std::size_t>(r)], r), std::vector<std::string>{"z"});
    EXPECT_FALSE(sim->strategy(r).registry().find("z")) << "rank " << r;
    EXPECT_EQ(sim->record(r).errors.size(), want_errors) << "rank " << r;
    EXPECT_TRUE(sim->record(r).warnings.empty()) << "rank " << r;
    EXPECT_FALSE(sim->record(r).fatal) << "rank " << r;
  }
  expect_identical_registries(*sim);
  EXPECT_EQ(sim->divergence(), "");
}

INSTANTIATE_TEST_SUITE_P(negotiation, id_reuse,
                         ::testing::Combine(::testing::Values("gossip", "central"), ::testing::Range(1, 6)),
                         param_name);

// The registry's rules on their own: the lowest free id, free only reuse_delay cycles after
// retiring, a retired id keeps its spec until then, the same calls give the same ids.
TEST(id_reuse_registry, lowest_free_id_after_the_delay) {
  tensor_registry reg;
  EXPECT_EQ(reg.add(spec("a", {1}), 1), 0u);
  EXPECT_EQ(reg.add(spec("b", {1}), 1), 1u);
  EXPECT_EQ(reg.add(spec("c", {1}), 1), 2u);
  EXPECT_EQ(reg.add(spec("c", {2}), 2), 3u);  // retires 2 at cycle 2
  EXPECT_EQ(reg.add(spec("a", {2}), 3), 4u);  // retires 0 at cycle 3; 2 still waits
  EXPECT_TRUE(reg.retired(0));
  EXPECT_TRUE(reg.retired(2));
  EXPECT_EQ(reg.spec(2), spec("c", {1}));  // a retired id keeps its spec while it waits
  EXPECT_EQ(reg.add(spec("b", {2}), 2 + delay), 2u);  // 2 is free now, 0 not yet; retires 1
  EXPECT_FALSE(reg.retired(2));
  EXPECT_EQ(reg.spec(2), spec("b", {2}));
  EXPECT_EQ(*reg.find("b"), 2u);
  EXPECT_EQ(reg.add(spec("d", {1}), 3 + delay), 0u);  // 0 is free now; 1 (retired at 4) not yet
  EXPECT_EQ(reg.add(spec("e", {1}), 3 + delay), 5u);  // none free: the range grows
  EXPECT_EQ(reg.add(spec("f", {1}), 4 + delay), 1u);
  EXPECT_EQ(reg.size(), 6u);
  EXPECT_EQ(reg.retired_count(), 3u);
  EXPECT_EQ(reg.reused_count(), 3u);
  EXPECT_EQ(reg.live_count(), 6u);
  EXPECT_EQ(*reg.find("a"), 4u);
  EXPECT_EQ(*reg.find("c"), 3u);
}

}  // namespace
}  // namespace chorus::negotiation
