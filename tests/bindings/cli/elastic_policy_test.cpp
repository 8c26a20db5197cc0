// chorusrun's elastic decisions (elastic_policy.hpp): which workers start or leave when the
// discovery script's hosts and slots change, never below --min-np; how a round numbers its
// workers per host; and what follows a lost worker.
#include "bindings/cli/chorusrun/elastic_policy.hpp"

#include <gtest/gtest.h>

using namespace chorus::chorusrun;

namespace {

// Workers `ids`, all on host `host`.
std::vector<worker_at> on(const std::string& host, std::vector<int> ids) {
  std::vector<worker_at> out;
  for (int id : ids) out.push_back({id, host});
  return out;
}

std::vector<host_slots> here(int slots) { return {{"here", slots}}; }

}  // namespace

TEST(elastic_policy, more_slots_start_workers_up_to_max_np) {
  auto p = plan_slots(on("here", {0, 1}), here(3), 2, 3);
  EXPECT_EQ(p.start, (std::vector<std::string>{"here"}));
  EXPECT_TRUE(p.remove.empty());
  EXPECT_EQ(plan_slots(on("here", {0, 1}), here(8), 2, 3).start.size(), 1u);  // capped by --max-np
  EXPECT_TRUE(plan_slots(on("here", {0, 1, 2}), here(3), 2, 3).start.empty());
  EXPECT_TRUE(plan_slots(on("here", {0, 1, 2}), here(3), 2, 3).remove.empty());
}

TEST(elastic_policy, fewer_slots_remove_the_highest_ids_but_never_below_min_np) {
  auto p = plan_slots(on("here", {0, 2, 5}), here(2), 1, 3);
  EXPECT_EQ(p.remove, (std::vector<int>{5}));
  EXPECT_TRUE(p.start.empty());
  EXPECT_EQ(p.kept_for_min_np, 0);
  EXPECT_EQ(plan_slots(on("here", {0, 1, 2, 3}), here(1), 1, 4).remove, (std::vector<int>{1, 2, 3}));
  auto floor = plan_slots(on("here", {0, 1, 2, 3}), here(1), 3, 4);
  EXPECT_EQ(floor.remove, (std::vector<int>{3}));
  EXPECT_EQ(floor.kept_for_min_np, 2);
  // No slots at all: still --min-np workers.
  auto none = plan_slots(on("here", {3, 4}), {}, 2, 4);
  EXPECT_TRUE(none.remove.empty());
  EXPECT_EQ(none.kept_for_min_np, 2);
}

TEST(elastic_policy, below_min_np_workers_start_only_when_they_reach_it) {
  EXPECT_EQ(plan_slots(on("here", {0}), here(2), 2, 3).start.size(), 1u);  // one survivor, a slot came back
  EXPECT_EQ(plan_slots(on("here", {0}), here(3), 2, 3).start.size(), 2u);
  EXPECT_TRUE(plan_slots(on("here", {0}), here(2), 3, 3).start.empty());  // two would still be below 3
  auto short_job = plan_slots(on("here", {0}), here(1), 2, 3);            // nobody leaves a job already short
  EXPECT_TRUE(short_job.start.empty());
  EXPECT_TRUE(short_job.remove.empty());
}

TEST(elastic_policy, a_host_that_is_no_longer_offered_loses_its_workers) {
  std::vector<worker_at> two_hosts = {{0, "a"}, {1, "b"}, {2, "a"}, {3, "b"}};
  auto gone = plan_slots(two_hosts, {{"a", 2}}, 1, 4);
  EXPECT_EQ(gone.remove, (std::vector<int>{1, 3}));
  EXPECT_TRUE(gone.start.empty());
  // --min-np 3 keeps the lower of b's workers.
  auto floor = plan_slots(two_hosts, {{"a", 2}}, 3, 4);
  EXPECT_EQ(floor.remove, (std::vector<int>{3}));
  EXPECT_EQ(floor.kept_for_min_np, 1);
  // Fewer slots on one host: its highest id leaves, the other host is untouched.
  EXPECT_EQ(plan_slots(two_hosts, {{"a", 1}, {"b", 2}}, 1, 4).remove, (std::vector<int>{2}));
}

TEST(elastic_policy, new_hosts_get_workers_in_the_scripts_order) {
  // Host b came back with two slots and c is new: b fills first, --max-np stops at 4.
  auto p = plan_slots({{0, "a"}, {2, "a"}}, {{"a", 2}, {"b", 2}, {"c", 2}}, 1, 4);
  EXPECT_EQ(p.start, (std::vector<std::string>{"b", "b"}));
  EXPECT_TRUE(p.remove.empty());
  // One host is swapped for another in one run: b's worker leaves, c gets one.
  auto swap = plan_slots({{0, "a"}, {1, "b"}}, {{"a", 1}, {"c", 1}}, 2, 2);
  EXPECT_EQ(swap.remove, (std::vector<int>{1}));
  EXPECT_EQ(swap.kept_for_min_np, 0);
  EXPECT_EQ(swap.start, (std::vector<std::string>{"c"}));
  // Every host replaced at once: the lowest id stays to hand on the state.
  auto all = plan_slots({{0, "a"}, {1, "a"}}, {{"b", 2}}, 1, 2);
  EXPECT_EQ(all.remove, (std::vector<int>{1}));
  EXPECT_EQ(all.kept_for_min_np, 1);
  EXPECT_EQ(all.start, (std::vector<std::string>{"b"}));
  // A free slot on a host whose workers are all there does not count twice.
  EXPECT_TRUE(plan_slots({{0, "a"}, {1, "b"}}, {{"a", 1}, {"b", 1}}, 1, 4).start.empty());
}

TEST(elastic_policy, a_round_numbers_workers_per_host_as_horovodrun_does) {
  // Ids ascending give ranks; hosts in order of their first worker: a (0, 2, 5), b (3, 4).
  auto places = round_places({{0, "a"}, {2, "a"}, {3, "b"}, {4, "b"}, {5, "a"}});
  ASSERT_EQ(places.size(), 5u);
  struct want {
    int rank, local_rank, local_size, cross_rank, cross_size;
  };
  const want expected[] = {{0, 0, 3, 0, 2}, {1, 1, 3, 0, 2}, {2, 0, 2, 1, 2}, {3, 1, 2, 1, 2}, {4, 2, 3, 0, 1}};
  for (size_t i = 0; i < places.size(); ++i) {
    SCOPED_TRACE("worker index " + std::to_string(i));
    EXPECT_EQ(places[i].rank, expected[i].rank);
    EXPECT_EQ(places[i].local_rank, expected[i].local_rank);
    EXPECT_EQ(places[i].local_size, expected[i].local_size);
    EXPECT_EQ(places[i].cross_rank, expected[i].cross_rank);
    EXPECT_EQ(places[i].cross_size, expected[i].cross_size);
  }
  EXPECT_EQ(places[2].host, "b");
  EXPECT_EQ(places[2].host_index, 1);
  // One host: every worker is local, as in a one-host job.
  auto one = round_places({{1, "h"}, {4, "h"}});
  EXPECT_EQ(one[1].rank, 1);
  EXPECT_EQ(one[1].local_rank, 1);
  EXPECT_EQ(one[1].local_size, 2);
  EXPECT_EQ(one[1].cross_size, 1);
}

TEST(elastic_policy, a_change_forms_a_round_waits_for_slots_or_ends_the_job) {
  EXPECT_EQ(decide_after_change(2, 2, false, false), after_change::form_round);
  EXPECT_EQ(decide_after_change(3, 2, true, true), after_change::form_round);
  EXPECT_EQ(decide_after_change(1, 2, true, false), after_change::wait_for_slots);
  EXPECT_EQ(decide_after_change(1, 2, true, true), after_change::end_job);   // --elastic-timeout passed
  EXPECT_EQ(decide_after_change(1, 2, false, false), after_change::end_job); // no discovery script
}

TEST(elastic_policy, reset_limit_counts_every_round_after_the_first_as_horovodrun_does) {
  EXPECT_FALSE(reset_limit_reached(0, std::nullopt));
  EXPECT_FALSE(reset_limit_reached(1000, std::nullopt));  // no limit: never
  EXPECT_TRUE(reset_limit_reached(0, 0));                  // --reset-limit 0: the first reset ends the job
  EXPECT_FALSE(reset_limit_reached(1, 2));                 // resets 1 and 2 happen,
  EXPECT_TRUE(reset_limit_reached(2, 2));                  // the third does not
  EXPECT_TRUE(reset_limit_reached(3, 2));
}
