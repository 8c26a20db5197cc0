// Horovod's join across real processes (N = 2, 3 on 127.0.0.1): ranks run different numbers of
// steps of allreduce, allgather, reducescatter and alltoall, then join; chorus-testrank
// pipeline-join checks every result exactly (joined ranks contribute neutral data), that join
// names the last rank on every rank and that the job goes on afterwards. Hard time bound.
#include <gtest/gtest.h>

#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class pipeline_join : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_join, joined_ranks_contribute_neutral_data_until_the_last_joins) {
  const int size = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-join"});
  auto results = job.wait(std::chrono::seconds(90));
  const std::string done = "pipeline-join: all exact, last rank " + std::to_string(size - 1);
  expect_all_passed(results);
  expect_every_rank_printed(results, done);
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_join, ::testing::Values(2, 3), size_name);

}  // namespace
}  // namespace chorus::testing
