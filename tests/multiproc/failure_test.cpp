// Failures across real processes: a rank killed in the middle of allreduces makes every other
// rank fail with an error naming it within 10 s; ranks that disagree on a collective's size all
// fail with a protocol error; a process that connects with the wrong job secret is refused and
// the job goes on.
#include <gtest/gtest.h>

#include "tests/multiproc/job_checks.hpp"

namespace chorus::testing {
namespace {

class killed_rank : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(killed_rank, survivors_fail_naming_it_within_10s) {
  auto [size, victim] = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "allreduce-loop", "60"});
  ASSERT_TRUE(job.wait_for_output(victim, "iteration 3", std::chrono::seconds(30))) << job.output(victim);
  auto killed_at = std::chrono::steady_clock::now();
  job.kill(victim, SIGKILL);
  auto results = job.wait(std::chrono::seconds(10));
  auto elapsed = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(elapsed, std::chrono::seconds(10));
  expect_survivors_name(results, victim);
}

INSTANTIATE_TEST_SUITE_P(sizes, killed_rank,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(3, 1), std::make_tuple(4, 0)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_kill" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(mismatched_sizes, every_rank_fails_with_a_protocol_error_instead_of_hanging) {
  local_job job(3, {CHORUS_TESTRANK_PATH, "mismatch"});
  expect_every_rank_failed_with(job.wait(std::chrono::seconds(20)), "testrank error: protocol");
}

// A peer whose data plane stops reading while its heartbeats still answer (its control link
// runs on a thread of its own): the other rank's sends stall, and it fails naming the peer
// within CHORUS_PEER_TIMEOUT_SECONDS (2 here) and some slack, not after the 20 s stall.
TEST(deaf_peer, a_peer_that_stops_reading_is_named_within_the_peer_timeout) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "deaf-data", "20"},
                {{"CHORUS_PEER_TIMEOUT_SECONDS", "2"}, {"CHORUS_SHM_BYTES", "0"}, {"CHORUS_NUM_STREAMS", "1"}});
  // Rank 1 reads again only after 20 s: an error before 10 s is the watchdog's.
  EXPECT_TRUE(job.wait_for_output(0, "testrank error", std::chrono::seconds(10))) << job.output(0);
  auto results = job.wait(std::chrono::seconds(40));
  ASSERT_EQ(results.size(), 2u);
  const auto& r0 = results[0];
  EXPECT_FALSE(r0.timed_out) << r0.output;
  EXPECT_TRUE(r0.exited && r0.exit_code == 3) << r0.output;
  // Two bounds race here, both set from CHORUS_PEER_TIMEOUT_SECONDS: the transport's own
  // watchdog ("has taken no data") and the kernel's TCP_USER_TIMEOUT on zero-window probes
  // ("Connection timed out", reported by the write that timed out, or by the read that then
  // finds the socket closed). Either names rank 1 well before its stall ends.
  EXPECT_NE(r0.output.find("testrank error: connection_lost: rank 1 "), std::string::npos) << r0.output;
  EXPECT_TRUE(r0.output.find("has taken no data on stream 0") != std::string::npos ||
              r0.output.find("Connection timed out") != std::string::npos)
      << r0.output;
}

TEST(wrong_secret, intruder_is_refused_and_the_job_goes_on) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "accept-intruder"});
  ASSERT_TRUE(job.wait_for_output(0, "ready", std::chrono::seconds(30))) << job.output(0);
  // The intruder knows the rendezvous (it is on the same host) but not the job secret: the store
  // refuses it; told rank 0's data endpoint anyway, the data plane refuses it too.
  local_job intruder_job(1, {CHORUS_TESTRANK_PATH, "intruder"}, intruder_env(job.env()));
  auto intruder = intruder_job.wait(std::chrono::seconds(30));
  EXPECT_TRUE(intruder[0].exited && intruder[0].exit_code == 0) << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("intruder refused by the store: rendezvous"), std::string::npos)
      << intruder[0].output;
  EXPECT_NE(intruder[0].output.find("intruder refused: wrong job secret"), std::string::npos) << intruder[0].output;

  auto results = job.wait(std::chrono::seconds(30));
  for (auto& r : results) {
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << ":\n" << r.output;
  }
  EXPECT_NE(results[0].output.find("refused=1"), std::string::npos) << results[0].output;
  EXPECT_NE(results[0].output.find("wrong job secret"), std::string::npos) << "rank 0 logs the refusal:\n"
                                                                          << results[0].output;
}

}  // namespace
}  // namespace chorus::testing
