// The C API (chorus.h) across real processes (N = 2, 3 on 127.0.0.1): chorus-testrank
// pipeline-c-api checks, on every rank, reducescatter of known data (result in the handle and
// in a caller buffer with a callback), alltoall with uneven splits (empty blocks included;
// handle and callback, received splits), join after uneven step counts returning the last rank
// (handle and callback), and that shapes differing across ranks give CHORUS_ERR_MISMATCH with
// a text naming the tensor, on every rank. Hard time bound.
#include <gtest/gtest.h>

#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class pipeline_c_api : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_c_api, scatter_alltoall_and_join_are_exact_and_mismatches_name_the_tensor_on_every_rank) {
  const int size = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-c-api"});
  auto results = job.wait(std::chrono::seconds(90));
  expect_all_passed(results);
  expect_every_rank_printed(results, "pipeline-c-api: all exact, last rank " + std::to_string(size - 1));
  // The largest group is the reference; on a tie (N = 2) the group with the lowest rank.
  expect_every_rank_printed(results, "mismatch error: mismatch: reducescatter('c.rs.mismatch'): shape [8,3] on " +
                                         rank_run(size - 1, size - 1) + " but [6,3] on " + rank_run(0, size - 2));
  // Alltoall negotiates without dim 0 (it may differ): the text shows it as 0.
  expect_every_rank_printed(results, "mismatch error: mismatch: alltoall('c.a2a.mismatch'): shape [0,3] on " +
                                         rank_run(size - 1, size - 1) + " but [0,2] on " + rank_run(0, size - 2));
  expect_every_rank_printed(results, "mismatch error: mismatch: allreduce('c.flag.mismatch'): transient false on " +
                                         rank_run(size - 1, size - 1) + " but true on " + rank_run(0, size - 2));
  expect_every_rank_printed(results, "mismatch error: mismatch: allreduce('c.priority.mismatch'): priority 2 on " +
                                         rank_run(size - 1, size - 1) + " but 1 on " + rank_run(0, size - 2));
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_c_api, ::testing::Values(2, 3), size_name);

}  // namespace
}  // namespace chorus::testing
