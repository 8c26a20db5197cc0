// Compression on the wire and the NaN/Inf check through the whole pipeline and the C++ API,
// across real processes (N = 2, 3 on 127.0.0.1; CHORUS_COMPRESSION_SHM=on, since ranks on one
// host otherwise run uncompressed: wire_shm_test.cpp): chorus-testrank pipeline-wire checks compressed
// results bit for bit against the ring's casts (several chunks), the error bound, identical bits
// on every rank, allgather and reducescatter, an integer tensor refused without harm to the one
// beside it, and NaN/Inf giving the named error or the same skip list on every rank. Hard time
// bound per job; seeds printed (CHORUS_TEST_SEED=<n> re-runs one).
#include <gtest/gtest.h>

#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class pipeline_wire : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_wire, compressed_results_and_nan_checks_agree_on_every_rank) {
  const int size = GetParam();
  const uint64_t seed = job_seed("pipeline_wire", size);
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-wire", std::to_string(seed)},
                {{"CHORUS_CHUNK_BYTES", "1048576"}, {"CHORUS_NAN_CHECK", "skip"}, {"CHORUS_COMPRESSION_SHM", "on"}});
  auto results = job.wait(std::chrono::seconds(120));
  const std::string context = "seed=" + std::to_string(seed) + " ";
  expect_all_passed(results, context);
  expect_every_rank_printed(results, "pipeline-wire: all checks passed", context);
  expect_every_rank_printed(results, "'nan.err'", context);
  expect_every_rank_printed(results, "allreduce('wire.ints')", context);
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_wire, ::testing::Values(2, 3), size_name);

}  // namespace
}  // namespace chorus::testing
