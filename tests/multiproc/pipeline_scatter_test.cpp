// Reducescatter and alltoall through the whole pipeline and the C++ API, across real processes
// (N = 2, 3 on 127.0.0.1): chorus-testrank pipeline-scatter checks every result exactly on
// every rank (every dtype and reduce op, uneven and empty slices, a multi-chunk tensor, all
// three API forms, per-rank alltoall splits with empty blocks) and that a shape mismatch fails
// on every rank naming the tensor. Hard time bound per job; seeds printed
// (CHORUS_TEST_SEED=<n> re-runs one).
#include <gtest/gtest.h>

#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class pipeline_scatter : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_scatter, reducescatter_and_alltoall_are_exact_on_every_rank) {
  const int size = GetParam();
  const uint64_t seed = job_seed("pipeline_scatter", size);
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-scatter", std::to_string(seed)});
  auto results = job.wait(std::chrono::seconds(90));
  const std::string context = "seed=" + std::to_string(seed) + " ";
  expect_all_passed(results, context);
  expect_every_rank_printed(results, "pipeline-scatter: all exact", context);
  expect_every_rank_printed(results, "reducescatter('rs.mismatch')", context);
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_scatter, ::testing::Values(2, 3), size_name);

}  // namespace
}  // namespace chorus::testing
