// The C++ API's process sets in a job of one rank: look-ups before init and after, static sets
// given to init (a list of every rank keeps id 0, a second init must ask for the same sets), a
// set op and a barrier in a set, the dynamic calls refused without CHORUS_DYNAMIC_PROCESS_SETS,
// and allowed with it (add, use, remove, the id handed out again).
#include <gtest/gtest.h>

#include <cstdlib>

#include "chorus/chorus.hpp"
#include "tests/support/one_rank_api.hpp"

namespace chorus {
namespace {

using testing::clear_launcher_env;

TEST(api_process_sets, lookups_need_a_job) {
  clear_launcher_env();
  EXPECT_TRUE(process_set_ids().empty());
  EXPECT_EQ(process_set_rank(0).error().message(), "process_set_rank: Horovod has not been initialized; use hvd.init().");
  EXPECT_EQ(process_set_size(0).error().code(), errc::invalid_argument);
  EXPECT_FALSE(barrier().ok());
}

TEST(api_process_sets, static_sets_of_one_rank) {
  clear_launcher_env();
  ::unsetenv("CHORUS_DYNAMIC_PROCESS_SETS");
  ::unsetenv("HOROVOD_DYNAMIC_PROCESS_SETS");
  ASSERT_TRUE(init({{0}}).ok());  // {0} is every rank here: it keeps id 0
  EXPECT_EQ(process_set_ids(), (std::vector<int>{0}));
  EXPECT_EQ(*process_set_size(0), 1);
  EXPECT_EQ(*process_set_rank(0), 0);
  EXPECT_EQ(process_set_rank(4).error().message(), "Process set does not exist or has not been registered.");
  EXPECT_TRUE(init({{0}}).ok()) << "the same sets again: ok";
  EXPECT_EQ(init({{0}, {1}}).code(), errc::invalid_argument);
  float x = 3;
  EXPECT_TRUE(allreduce_async(in_process_set("x", 0), {&x, dtype::f32, {1}}, reduce_op::sum).wait().ok());
  EXPECT_EQ(x, 3);
  auto unknown = allreduce_async(in_process_set("x", 4), {&x, dtype::f32, {1}}, reduce_op::sum);
  ASSERT_TRUE(unknown.poll()) << "refused at the call";
  EXPECT_EQ(unknown.result().message(), "allreduce('x') in process set 4 on rank 0: process set 4 does not exist or has "
                                        "not been registered");
  EXPECT_TRUE(barrier(0).ok());
  auto added = add_process_set({0});
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.error().message(), "add_process_set: Set HOROVOD_DYNAMIC_PROCESS_SETS=1 (or "
                                     "CHORUS_DYNAMIC_PROCESS_SETS=1) to allow adding process sets after Horovod "
                                     "initialization.");
  shutdown();
}

TEST(api_process_sets, dynamic_sets_of_one_rank) {
  clear_launcher_env();
  ::setenv("CHORUS_DYNAMIC_PROCESS_SETS", "1", 1);
  ASSERT_TRUE(init().ok());
  EXPECT_EQ(add_process_set({0}).error().message(), "add_process_set: a process set of ranks 0 exists already (id 0)");
  EXPECT_EQ(add_process_set({1}).error().message(), "add_process_set: process set rank 1 outside the job's ranks 0-0");
  EXPECT_EQ(remove_process_set(0).message(), "remove_process_set(0): the global process set (id 0) cannot be removed");
  EXPECT_EQ(remove_process_set(3).message(), "remove_process_set(3): process set 3 does not exist");
  shutdown();
  ::unsetenv("CHORUS_DYNAMIC_PROCESS_SETS");
}

}  // namespace
}  // namespace chorus
