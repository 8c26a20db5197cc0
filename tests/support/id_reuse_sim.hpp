// Test helper for the tests of the reuse of retired tensor ids (negotiation_id_reuse_test.cpp,
// negotiation_id_reuse_join_test.cpp): a simulator of N ranks of either strategy, one step of
// specs enqueued in a random order (a late rank optional), the names agreed since a batch, the
// checks that every rank's registry and assignments are rank 0's, transient specs, and the
// parameterised fixture (strategy, N) with its test-name generator.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/negotiation/registry.hpp"
#include "runtime/negotiation/simulator.hpp"
#include "tests/support/negotiation_sim.hpp"

namespace chorus::negotiation::id_reuse_sim {

using namespace std::chrono_literals;
using chorus::testing::spec;

inline constexpr uint64_t delay = tensor_registry::reuse_delay;

inline std::unique_ptr<simulator> make_sim(const std::string& strategy, int n, uint64_t seed) {
  negotiation_options nego;
  nego.cycle_time = 100us;
  return chorus::testing::make_sim(strategy, n, seed, nego);
}

/// The names agreed on `rank` from batch `from` on, sorted (looked up when they were agreed).
inline std::vector<std::string> agreed_since(simulator& sim, std::size_t from, int rank) {
  std::vector<std::string> out;
  const auto& names = sim.record(rank).batch_names;
  for (std::size_t i = from; i < names.size(); ++i) out.insert(out.end(), names[i].begin(), names[i].end());
  std::sort(out.begin(), out.end());
  return out;
}

/// Every rank's registry is rank 0's: the same range, the same live ids with the same specs,
/// the same counters. And on every rank every batch read after its call (as the negotiator
/// actor reads it) named what its ids stood for when it was agreed: no id came back too early.
inline void expect_identical_registries(simulator& sim) {
  for (int r = 0; r < sim.size(); ++r) {
    const auto& stale = sim.record(r).stale_lookups;
    EXPECT_TRUE(stale.empty()) << "rank " << r << ": " << stale.front();
    EXPECT_LE(sim.record(r).max_cycles_per_call, 1 + delay) << "rank " << r;
  }
  const auto& reg0 = sim.strategy(0).registry();
  for (int r = 1; r < sim.size(); ++r) {
    const auto& reg = sim.strategy(r).registry();
    ASSERT_EQ(reg.size(), reg0.size()) << "rank " << r;
    EXPECT_EQ(reg.retired_count(), reg0.retired_count()) << "rank " << r;
    EXPECT_EQ(reg.reused_count(), reg0.reused_count()) << "rank " << r;
    EXPECT_EQ(reg.live_count(), reg0.live_count()) << "rank " << r;
    for (uint32_t id = 0; id < reg.size(); ++id) {
      EXPECT_EQ(reg.retired(id), reg0.retired(id)) << "id " << id << " on rank " << r;
      if (!reg.retired(id)) {
        EXPECT_EQ(reg.spec(id), reg0.spec(id)) << "id " << id << " on rank " << r;
        EXPECT_EQ(reg.find(reg.spec(id).name), std::optional<uint32_t>(id)) << "id " << id << " on rank " << r;
      }
    }
  }
}

/// Every rank enqueues its specs of `step` in a random order with random gaps; a `late` rank
/// (>= 0) only once the others' cycles have run for a while. Then runs until idle.
inline void run_step(simulator& sim, const std::vector<std::vector<tensor_spec>>& step, std::mt19937_64& rng,
                     int late = -1) {
  int n = sim.size();
  auto order = step;
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::size_t> next(static_cast<std::size_t>(n), 0);
  auto enqueue_all = [&](bool late_part) {
    std::size_t left = 0;
    for (int r = 0; r < n; ++r)
      if ((r == late) == late_part) left += order[static_cast<std::size_t>(r)].size();
    for (; left > 0; --left) {
      int r = static_cast<int>(rng() % static_cast<uint64_t>(n));
      while ((r == late) != late_part || next[static_cast<std::size_t>(r)] == order[static_cast<std::size_t>(r)].size())
        r = (r + 1) % n;
      sim.enqueue(r, order[static_cast<std::size_t>(r)][next[static_cast<std::size_t>(r)]++]);
      sim.run_for(std::chrono::microseconds(rng() % 150));
    }
  };
  enqueue_all(false);
  if (late >= 0) {
    sim.run_for(3ms);
    enqueue_all(true);
  }
  ASSERT_TRUE(sim.run_until_idle()) << "negotiation did not finish (a stall)";
}

class id_reuse : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

inline tensor_spec transient_spec(std::string name, std::vector<int64_t> shape) {
  auto s = spec(std::move(name), std::move(shape));
  s.transient = true;
  return s;
}

/// Every rank got the same ids for the same names at the same cycles.
inline void expect_identical_assignments(simulator& sim) {
  const auto& a0 = sim.record(0).assigned;
  for (int r = 1; r < sim.size(); ++r) {
    const auto& a = sim.record(r).assigned;
    ASSERT_EQ(a.size(), a0.size()) << "rank " << r;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::tie(a[i].name, a[i].id, a[i].cycle), std::tie(a0[i].name, a0[i].id, a0[i].cycle))
          << "assignment " << i << " on rank " << r;
      EXPECT_EQ(a[i].spec, a0[i].spec) << "assignment " << i << " on rank " << r;
    }
  }
}

inline std::string param_name(const ::testing::TestParamInfo<id_reuse::ParamType>& info) {
  return std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param));
}

}  // namespace chorus::negotiation::id_reuse_sim
