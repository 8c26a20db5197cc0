// Every collective across real processes on 127.0.0.1 with N = 2, 3 and 4 ranks (a non-power
// of two included), sizes 0, 1, odd, 4 KiB and 16 MiB: the ranks check exact results
// themselves (tests/multiproc/rank/collective_checks.cpp) and exit 0 only when all match.
// Payloads go through the shared-memory rings by default (every rank is on this host); also
// with the rings off, and with rings so small that frames wait for room or go on TCP.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

class collectives_across_processes : public ::testing::TestWithParam<std::tuple<int, int, std::string>> {};

TEST_P(collectives_across_processes, every_collective_is_exact) {
  auto [size, streams, shm_bytes] = GetParam();
  std::map<std::string, std::string> env{{"CHORUS_NUM_STREAMS", std::to_string(streams)}};
  if (!shm_bytes.empty()) env["CHORUS_SHM_BYTES"] = shm_bytes;
  local_job job(size, {CHORUS_TESTRANK_PATH, "collectives"}, env);
  auto results = job.wait(std::chrono::seconds(60));
  int rings = shm_bytes == "0" ? 0 : (size - 1) * streams;
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
    EXPECT_NE(r.output.find("collectives exact on rank " + std::to_string(r.rank) + " of " + std::to_string(size) +
                            ", " + std::to_string(streams) + " streams, " + std::to_string(rings) +
                            " through shared memory"),
              std::string::npos)
        << r.output;
    if (rings) EXPECT_EQ(r.output.find("(frames 0,"), std::string::npos) << "no frame used the rings:\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ranks_and_streams, collectives_across_processes,
    ::testing::Values(std::make_tuple(2, 1, std::string()), std::make_tuple(2, 3, std::string()),
                      std::make_tuple(3, 2, std::string()), std::make_tuple(4, 2, std::string()),
                      std::make_tuple(2, 2, std::string("0")), std::make_tuple(3, 2, std::string("0")),
                      // 300 KiB: one 512 KiB segment never fits (TCP), smaller ones wait for room
                      std::make_tuple(3, 2, std::string("307200"))),
    [](const auto& info) {
      const std::string& shm = std::get<2>(info.param);
      return "n" + std::to_string(std::get<0>(info.param)) + "_streams" + std::to_string(std::get<1>(info.param)) +
             (shm.empty() ? "" : shm == "0" ? "_shm_off" : "_shm_" + shm);
    });

}  // namespace
}  // namespace chorus::testing
