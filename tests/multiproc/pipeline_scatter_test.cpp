// Reducescatter and alltoall through the whole pipeline and the C++ API, across real processes
// (N = 2, 3 on 127.0.0.1): chorus-testrank pipeline-scatter checks every result exactly on
// every rank (every dtype and reduce op, uneven and empty slices, a multi-chunk tensor, all
// three API forms, per-rank alltoall splits with empty blocks) and that a shape mismatch fails
// on every rank naming the tensor. Hard time bound per job; seeds printed
// (CHORUS_TEST_SEED=<n> re-runs one).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class pipeline_scatter : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_scatter, reducescatter_and_alltoall_are_exact_on_every_rank) {
  const int size = GetParam();
  const char* fixed = std::getenv("CHORUS_TEST_SEED");
  uint64_t seed = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  std::printf("pipeline_scatter n=%d seed=%llu (re-run with CHORUS_TEST_SEED=%llu)\n", size,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-scatter", std::to_string(seed)});
  auto results = job.wait(std::chrono::seconds(90));
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "seed=" << seed << " rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "seed=" << seed << " rank " << r.rank << " failed:\n" << r.output;
    EXPECT_NE(r.output.find("pipeline-scatter: all exact"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("reducescatter('rs.mismatch')"), std::string::npos) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_scatter, ::testing::Values(2, 3),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace chorus::testing
