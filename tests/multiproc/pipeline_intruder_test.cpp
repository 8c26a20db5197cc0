// A process that reaches rank 0's port without the job secret (tests/multiproc/rank/
// pipeline_intruder.cpp) while the actor pipeline runs: it is refused by the store, then
// claims rank 1's control connection (the control link's connections arrive with the data
// plane's, behind the same handshake) with a proof made without the secret. It is refused
// and logged on rank 0, the control link carries the negotiation on, and every allreduce of
// the job stays exact and none fails. (failure_test: the same on a data stream without the
// pipeline.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

TEST(control_link_intruder, is_refused_and_the_job_goes_on) {
  std::string go = ::testing::TempDir() + "chorus-ctrl-go-" + random_hex(6);
  std::remove(go.c_str());
  local_job job(2, {CHORUS_TESTRANK_PATH, "pipeline-ctrl-job", go});
  ASSERT_TRUE(job.wait_for_output(0, "ready", std::chrono::seconds(30))) << job.output(0);
  ASSERT_TRUE(job.wait_for_output(1, "ready", std::chrono::seconds(30))) << job.output(1);

  // Knows the rendezvous, not the secret: the store refuses it; it learns rank 0's endpoint
  // anyway (read with CHORUS_TEST_STORE_SECRET, as a port scan would find it).
  local_job intruder_job(1, {CHORUS_TESTRANK_PATH, "pipeline-ctrl-intruder"}, intruder_env(job.env()));
  auto intruder = intruder_job.wait(std::chrono::seconds(30));
  EXPECT_TRUE(intruder[0].exited && intruder[0].exit_code == 0) << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("intruder refused by the store"), std::string::npos) << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("intruder refused on the control link: wrong job secret"), std::string::npos)
      << intruder[0].output;
  std::ofstream(go) << "go\n";

  auto results = job.wait(std::chrono::seconds(60));
  std::remove(go.c_str());
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("exact while attacked"), std::string::npos) << r.output;
  }
  const std::string& log0 = results[0].output;
  EXPECT_NE(log0.find("refused connection from"), std::string::npos) << log0;
  EXPECT_NE(log0.find("wrong job secret"), std::string::npos) << "rank 0 logs the refusal:\n" << log0;
}

}  // namespace
}  // namespace chorus::testing
