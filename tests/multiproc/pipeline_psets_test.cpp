// Process sets across real processes (N = 3, 4 on 127.0.0.1), driven through the C++ API by
// chorus-testrank's pipeline-psets modes (tests/multiproc/rank/pipeline_psets.cpp): two
// overlapping static sets and the global set run every collective at once, with the same names,
// exactly; a rank outside a set gets Horovod's error naming the tensor and itself; dynamic sets
// are added, used, removed and their id used again, and refused without
// CHORUS_DYNAMIC_PROCESS_SETS. Seeds: CHORUS_TEST_SEED=<n> re-runs a failed case.
#include <gtest/gtest.h>

#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class pipeline_psets : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_psets, overlapping_sets_run_concurrently_and_exactly) {
  const int size = GetParam();
  const uint64_t seed = job_seed("pipeline_psets", size);
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-psets", std::to_string(seed)});
  auto results = job.wait(std::chrono::seconds(100));
  const std::string context = "seed=" + std::to_string(seed) + ": ";
  expect_all_passed(results, context);
  expect_every_rank_printed(results, "pipeline-psets: all exact", context);
  const std::string outsider = "invalid_argument: allreduce('outsider') in process set 2 on rank 0: rank 0 is not "
                               "a member of the provided process set (ranks " +
                               (size == 3 ? std::string("1,2") : std::string("1,2,3")) + ")";
  ASSERT_FALSE(results.empty());
  EXPECT_NE(results[0].output.find("outsider error: " + outsider), std::string::npos)
      << context << "rank 0 should print\n  " << outsider << "\noutput:\n"
      << results[0].output;
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_psets, ::testing::Values(3, 4), size_name);

TEST(pipeline_psets_c, the_c_api_registers_names_in_sets_and_refuses_an_outsider_at_enqueue) {
  local_job job(3, {CHORUS_TESTRANK_PATH, "pipeline-psets-c"});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  expect_every_rank_printed(results, "pipeline-psets-c: all exact");
  ASSERT_FALSE(results.empty());
  const std::string outsider = "outsider error: allreduce('outsider') in process set 2 on rank 0: "
                               "rank 0 is not a member of the provided process set (ranks 1,2)";
  EXPECT_NE(results[0].output.find(outsider), std::string::npos)
      << "rank 0 should print\n  " << outsider << "\noutput:\n" << results[0].output;
}

TEST(pipeline_psets_dynamic, sets_are_added_used_removed_and_ids_reused) {
  local_job job(3, {CHORUS_TESTRANK_PATH, "pipeline-psets-dynamic"}, {{"CHORUS_DYNAMIC_PROCESS_SETS", "1"}});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  expect_every_rank_printed(results, "pipeline-psets-dynamic: ok (ids 1, 1)");
}

TEST(pipeline_psets_dynamic, adding_a_set_needs_the_variable) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "pipeline-psets-dynamic"});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  expect_every_rank_printed(results, "Set HOROVOD_DYNAMIC_PROCESS_SETS=1 (or CHORUS_DYNAMIC_PROCESS_SETS=1) to allow "
                                     "adding process sets after Horovod initialization.");
}

}  // namespace
}  // namespace chorus::testing
