// chorusrun's elastic decisions (elastic_policy.hpp): which workers start or leave when the
// discovery script's slots change, never below --min-np, and what follows a lost worker.
#include "bindings/cli/chorusrun/elastic_policy.hpp"

#include <gtest/gtest.h>

using namespace chorus::chorusrun;

TEST(elastic_policy, more_slots_start_workers_up_to_max_np) {
  auto p = plan_slots({0, 1}, 3, 2, 3);
  EXPECT_EQ(p.start, 1);
  EXPECT_TRUE(p.remove.empty());
  EXPECT_EQ(plan_slots({0, 1}, 8, 2, 3).start, 1);  // capped by --max-np
  EXPECT_EQ(plan_slots({0, 1, 2}, 3, 2, 3).start, 0);
  EXPECT_TRUE(plan_slots({0, 1, 2}, 3, 2, 3).remove.empty());
}

TEST(elastic_policy, fewer_slots_remove_the_highest_ids_but_never_below_min_np) {
  auto p = plan_slots({0, 2, 5}, 2, 1, 3);
  EXPECT_EQ(p.remove, (std::vector<int>{5}));
  EXPECT_EQ(p.start, 0);
  EXPECT_EQ(p.kept_for_min_np, 0);
  EXPECT_EQ(plan_slots({0, 1, 2, 3}, 1, 1, 4).remove, (std::vector<int>{1, 2, 3}));
  auto floor = plan_slots({0, 1, 2, 3}, 1, 3, 4);
  EXPECT_EQ(floor.remove, (std::vector<int>{3}));
  EXPECT_EQ(floor.kept_for_min_np, 2);
  // No slots here at all: still --min-np workers.
  auto none = plan_slots({3, 4}, 0, 2, 4);
  EXPECT_TRUE(none.remove.empty());
  EXPECT_EQ(none.kept_for_min_np, 2);
}

TEST(elastic_policy, below_min_np_workers_start_only_when_they_reach_it) {
  EXPECT_EQ(plan_slots({0}, 2, 2, 3).start, 1);  // one survivor, a slot came back
  EXPECT_EQ(plan_slots({0}, 3, 2, 3).start, 2);
  EXPECT_EQ(plan_slots({0}, 2, 3, 3).start, 0);  // two would still be below 3: they would find no round
  auto short_job = plan_slots({0}, 1, 2, 3);      // nobody is removed from a job already short
  EXPECT_EQ(short_job.start, 0);
  EXPECT_TRUE(short_job.remove.empty());
}

TEST(elastic_policy, a_change_forms_a_round_waits_for_slots_or_ends_the_job) {
  EXPECT_EQ(decide_after_change(2, 2, false, false), after_change::form_round);
  EXPECT_EQ(decide_after_change(3, 2, true, true), after_change::form_round);
  EXPECT_EQ(decide_after_change(1, 2, true, false), after_change::wait_for_slots);
  EXPECT_EQ(decide_after_change(1, 2, true, true), after_change::end_job);   // --elastic-timeout passed
  EXPECT_EQ(decide_after_change(1, 2, false, false), after_change::end_job); // no discovery script
}
