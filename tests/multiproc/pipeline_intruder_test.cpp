// A process that reaches a rank's control port without the job secret (tests/multiproc/rank/
// pipeline_intruder.cpp): it sends forged seals, unsealed protocol messages (a stop, a fake
// peer loss, a hello that would redirect rank 1's gossip to it) and exit(kill) to rank 0's
// control gate while the job runs. Each is refused and logged on rank 0, naming what it
// claimed to be; the gate stays up; every allreduce of the job stays exact and none fails.
// The job runs the CAF control plane (CHORUS_CONTROL_PLANE=caf), where such a port exists;
// the default TCP control link is a connection of the data plane's mesh, behind its handshake
// (failure_test: a wrong secret is refused and the job goes on).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

TEST(control_plane_intruder, is_refused_and_the_job_goes_on) {
  std::string go = ::testing::TempDir() + "chorus-ctrl-go-" + random_hex(6);
  std::remove(go.c_str());
  local_job job(2, {CHORUS_TESTRANK_PATH, "pipeline-ctrl-job", go}, {{"CHORUS_CONTROL_PLANE", "caf"}});
  ASSERT_TRUE(job.wait_for_output(0, "ready", std::chrono::seconds(30))) << job.output(0);
  ASSERT_TRUE(job.wait_for_output(1, "ready", std::chrono::seconds(30))) << job.output(1);

  // Knows the rendezvous, not the secret: the store refuses it; it learns rank 0's control
  // endpoint anyway (read with CHORUS_TEST_STORE_SECRET, as a port scan would find it).
  local_job intruder_job(1, {CHORUS_TESTRANK_PATH, "pipeline-ctrl-intruder"}, intruder_env(job.env()));
  auto intruder = intruder_job.wait(std::chrono::seconds(30));
  EXPECT_TRUE(intruder[0].exited && intruder[0].exit_code == 0) << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("intruder refused by the store"), std::string::npos) << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("intruder sent 9 messages"), std::string::npos) << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("gate still up"), std::string::npos) << intruder[0].output;
  std::ofstream(go) << "go\n";

  auto results = job.wait(std::chrono::seconds(60));
  std::remove(go.c_str());
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("exact while attacked"), std::string::npos) << r.output;
  }
  const std::string& log0 = results[0].output;
  EXPECT_NE(log0.find("refused a message claiming to come from rank 1: wrong seal"), std::string::npos) << log0;
  for (const char* unsealed : {"'stop'", "'ctrlhello'", "'peergone'", "gossip_bytes", "pipeline_wired", "exit_msg"})
    EXPECT_NE(log0.find(std::string("not sealed with the job secret: (") + unsealed), std::string::npos)
        << unsealed << " not refused by name:\n"
        << log0;
  EXPECT_NE(log0.find("refused so far: 9"), std::string::npos) << log0;
}

}  // namespace
}  // namespace chorus::testing
