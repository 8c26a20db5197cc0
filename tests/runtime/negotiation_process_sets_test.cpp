// Negotiation with process sets, in the scale simulator (pure, no I/O): a tensor of a set is
// agreed once every member has it, with no help from the other ranks, on every rank alike (the
// non-members' batches name it too, so their plans stay in step); the same name in two sets is
// two tensors; registered ids of a set travel as bits; a rank outside a set is refused at once
// with Horovod's words; a stall names only the set's members; the process set table's ids, look-ups and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "runtime/process_sets/process_set.hpp"
#include "tests/support/negotiation_sim.hpp"

namespace chorus::testing {
namespace {

tensor_spec in_set(std::string name, int set) {
  auto s = spec(negotiated_name(name, set), {4});
  s.process_set = set;
  return s;
}

/// 4 ranks; set 1 = {0,1}, set 2 = {1,2,3}.
std::unique_ptr<negotiation::simulator> four_ranks_two_sets(const std::string& strategy, uint64_t seed,
                                                             negotiation::negotiation_options o = {}) {
  auto table = std::make_shared<process_set_table>(4);
  EXPECT_EQ(*table->add({1, 0}), 1);
  EXPECT_EQ(*table->add({3, 1, 2}), 2);
  o.hold_when_ahead = true;
  o.process_sets = table;
  return make_sim(strategy, 4, seed, o);
}

std::vector<std::string> all_names(const negotiation::rank_record& r) {
  std::vector<std::string> out;
  for (const auto& b : r.batch_names) out.insert(out.end(), b.begin(), b.end());
  return out;
}

class negotiation_process_sets : public ::testing::TestWithParam<std::string> {};

TEST_P(negotiation_process_sets, a_set_agrees_its_tensors_without_the_other_ranks_and_everyone_sees_it) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto sim = four_ranks_two_sets(GetParam(), seed);
    // The same name in both sets and in the global set: three tensors.
    sim->enqueue(0, in_set("w", 1));
    sim->enqueue(1, in_set("w", 1));
    for (int r : {1, 2, 3}) sim->enqueue(r, in_set("w", 2));
    ASSERT_TRUE(sim->run_until_idle()) << "seed " << seed;
    for (int r = 0; r < 4; ++r) sim->enqueue(r, spec("w", {4}));
    ASSERT_TRUE(sim->run_until_idle()) << "seed " << seed;
    EXPECT_EQ(sim->divergence(), "") << "seed " << seed;
    for (int r = 0; r < 4; ++r) {
      auto names = all_names(sim->record(r));
      std::sort(names.begin(), names.end());
      EXPECT_EQ(names, (std::vector<std::string>{"w", "w [process set 1]", "w [process set 2]"})) << "rank " << r;
      EXPECT_TRUE(sim->record(r).errors.empty()) << sim->record(r).errors.front().message;
      EXPECT_TRUE(sim->record(r).rejected.empty());
    }
    // Again: now registered, the set's tensors travel as bits, and rank 3 (outside set 1)
    // must count as ready for set 1's id.
    sim->enqueue(0, in_set("w", 1));
    sim->enqueue(1, in_set("w", 1));
    ASSERT_TRUE(sim->run_until_idle()) << "seed " << seed;
    EXPECT_EQ(sim->divergence(), "") << "seed " << seed;
    for (int r = 0; r < 4; ++r) EXPECT_EQ(all_names(sim->record(r)).size(), 4u) << "rank " << r << " seed " << seed;
  }
}

TEST_P(negotiation_process_sets, a_rank_outside_the_set_is_refused_with_horovods_words) {
  auto sim = four_ranks_two_sets(GetParam(), 7);
  sim->enqueue(3, in_set("x", 1));
  sim->enqueue(0, in_set("y", 9));
  ASSERT_TRUE(sim->run_until_idle());
  ASSERT_EQ(sim->record(3).rejected.size(), 1u);
  EXPECT_EQ(sim->record(3).rejected[0].error.message(),
            "allreduce('x') in process set 1: rank 3 is not a member of the provided process set (ranks 0,1)");
  ASSERT_EQ(sim->record(0).rejected.size(), 1u);
  EXPECT_EQ(sim->record(0).rejected[0].error.message(),
            "allreduce('y') in process set 9: process set 9 does not exist or has not been registered");
}

TEST_P(negotiation_process_sets, a_mismatch_inside_a_set_names_only_its_members) {
  auto sim = four_ranks_two_sets(GetParam(), 11);
  for (int r : {1, 2}) sim->enqueue(r, in_set("m", 2));
  auto other = in_set("m", 2);
  other.shape = {5};
  sim->enqueue(3, other);
  ASSERT_TRUE(sim->run_until_idle());
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(sim->record(r).errors.size(), 1u) << "rank " << r;
    EXPECT_EQ(sim->record(r).errors[0].message,
              "allreduce('m') in process set 2: shape [5] on rank 3 but [4] on ranks 1-2");
  }
}

TEST_P(negotiation_process_sets, a_stall_inside_a_set_names_only_its_members) {
  using namespace std::chrono_literals;
  negotiation::negotiation_options o;
  o.stall_warning_time = 1s;
  o.stall_shutdown_time = 3s;
  auto sim = four_ranks_two_sets(GetParam(), 13, o);
  // First by name (rank 3 never announces it), then, registered, by id (rank 0 is outside
  // set 2 and counts as ready in the gossip: it must not be named).
  for (int r : {1, 2}) sim->enqueue(r, in_set("s", 2));
  ASSERT_TRUE(sim->run_until_idle());
  sim->run_for(1500ms);
  EXPECT_EQ(sim->divergence(), "");
  // Every rank's warning `k` names `missing` only.
  auto expect_warning = [&](std::size_t k, int missing, const std::string& ready) {
    for (int r = 0; r < 4; ++r) {
      ASSERT_EQ(sim->record(r).warnings.size(), k + 1) << "rank " << r;
      EXPECT_EQ(sim->record(r).warnings[k].missing_ranks, (std::vector<int>{missing}));
      EXPECT_EQ(sim->record(r).warnings[k].message, "stall: allreduce('s') in process set 2: ready on " + ready +
                                                        " but not produced by rank " + std::to_string(missing) +
                                                        " after 1 s (CHORUS_STALL_CHECK_TIME_SECONDS)");
    }
  };
  expect_warning(0, 3, "ranks 1-2");
  sim->enqueue(3, in_set("s", 2));
  ASSERT_TRUE(sim->run_until_idle());
  for (int r : {1, 3}) sim->enqueue(r, in_set("s", 2));
  ASSERT_TRUE(sim->run_until_idle());
  sim->run_for(3100ms);
  EXPECT_EQ(sim->divergence(), "");
  expect_warning(1, 2, "ranks 1,3");
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(sim->record(r).fatal) << "rank " << r;
    EXPECT_EQ(sim->record(r).fatal->message(),
              "stall: allreduce('s') in process set 2: ready on ranks 1,3 but not produced by rank 2 after 3 s; "
              "stopping the job (CHORUS_STALL_SHUTDOWN_TIME_SECONDS)");
  }
}

INSTANTIATE_TEST_SUITE_P(strategies, negotiation_process_sets, ::testing::Values("gossip", "central"));

TEST(process_set_table, ids_lookups_and_errors) {
  process_set_table t(4);
  EXPECT_EQ(t.find(0)->ranks, (std::vector<int>{0, 1, 2, 3}));
  auto a = t.add({2, 0});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 1);
  EXPECT_EQ(t.find(1)->local_rank(2), 1);
  EXPECT_EQ(t.find(1)->local_rank(1), -1);
  EXPECT_EQ(t.add({0, 2}).error().message(), "a process set of ranks 0,2 exists already (id 1)");
  EXPECT_EQ(t.add({0, 1, 2, 3}).error().message(), "a process set of ranks 0,1,2,3 exists already (id 0)");
  EXPECT_EQ(t.add({4}).error().message(), "process set rank 4 outside the job's ranks 0-3");
  EXPECT_EQ(t.add({1, 1}).error().message(), "process set rank 1 given twice");
  EXPECT_EQ(t.add({}).error().message(), "a process set needs at least one rank");
  EXPECT_EQ(*t.add({3}), 2);
  EXPECT_TRUE(t.remove(1).ok());
  EXPECT_EQ(t.remove(1).message(), "process set 1 does not exist");
  EXPECT_EQ(t.remove(0).message(), "the global process set (id 0) cannot be removed");
  EXPECT_EQ(*t.add({1, 2}), 1);  // the freed id
  EXPECT_EQ(*t.add({1, 3}), 3);
  EXPECT_EQ(t.all().size(), 4u);
}

TEST(process_set_names, negotiated_names_and_descriptions) {
  auto s = in_set("fc1.weight", 2);
  EXPECT_EQ(s.name, "fc1.weight [process set 2]");
  EXPECT_EQ(caller_name(s), "fc1.weight");
  EXPECT_EQ(describe(s), "allreduce('fc1.weight') in process set 2");
  EXPECT_EQ(describe(spec("fc1.weight", {1})), "allreduce('fc1.weight')");
}

}  // namespace
}  // namespace chorus::testing
