// Running out of file descriptors while the mesh forms: a two-rank job under `ulimit -n 20` (too
// few for 2 x 9 connections plus the rendezvous) must end quickly with the system's reason and
// the limit to raise, never wait out the connect timeout (it spun for 60 s before).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/support/shell_run.hpp"

namespace chorus::testing {
namespace {

TEST(fd_limit, too_few_descriptors_at_connect_time_is_a_clear_error_not_a_wait) {
  auto start = std::chrono::steady_clock::now();
  auto r = run("timeout 60 sh -c 'ulimit -n 20 && exec " CHORUSRUN_PATH " -np 2 --timeout 50 -- " CHORUS_TESTRANK_PATH
               " collectives'");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.exit_code, 124) << "the job ran into its timeout:\n" << r.out;
  EXPECT_LT(took, std::chrono::seconds(20)) << r.out;
  EXPECT_NE(r.out.find("Too many open files"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ulimit -n"), std::string::npos) << "no hint at the limit:\n" << r.out;
}

}  // namespace
}  // namespace chorus::testing
