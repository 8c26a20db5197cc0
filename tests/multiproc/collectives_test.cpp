// Every collective across real processes on 127.0.0.1 with N = 2, 3 and 4 ranks (a non-power
// of two included), sizes 0, 1, odd, 4 KiB and 16 MiB: the ranks check exact results
// themselves (tests/multiproc/rank/collective_checks.cpp) and exit 0 only when all match.
#include <gtest/gtest.h>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class collectives_across_processes : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(collectives_across_processes, every_collective_is_exact) {
  auto [size, streams] = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "collectives"}, {{"CHORUS_NUM_STREAMS", std::to_string(streams)}});
  auto results = job.wait(std::chrono::seconds(60));
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
    EXPECT_NE(r.output.find("collectives exact on rank " + std::to_string(r.rank)), std::string::npos) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(ranks_and_streams, collectives_across_processes,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(2, 3), std::make_tuple(3, 2),
                                           std::make_tuple(4, 2)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_streams" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace chorus::testing
