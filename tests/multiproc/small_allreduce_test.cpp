// Small allreduces on the calling thread (runtime/collectives/mailbox_allreduce.hpp) across real
// processes on one host: a rank that dies while the others wait in one (killed before it posts,
// or killed anywhere in a tight loop) is named by every survivor within the bound the I/O
// thread's path keeps (10 s, as failure_test.cpp), and ranks whose calls differ all fail with a
// protocol error instead of hanging or reducing garbage; ranks given different settings for the
// path, or for the pipeline's fusion, fail at init.
#include <gtest/gtest.h>

#include "tests/multiproc/job_checks.hpp"

namespace chorus::testing {
namespace {

/// The survivors took the caller's path and name the victim (job_checks.hpp).
void expect_named(const std::vector<rank_result>& results, int victim) {
  expect_survivors_name(results, victim);
  for (auto& r : results) {
    if (r.rank == victim) continue;
    EXPECT_NE(r.output.find("small on caller: yes"), std::string::npos) << "the caller's path was not taken:\n"
                                                                         << r.output;
  }
}

class small_killed_rank : public ::testing::TestWithParam<std::tuple<int, int>> {};

// The victim dies instead of starting allreduce 300: the survivors are inside it, past their
// spin, asleep on the mailbox's futex; only the I/O thread's interrupt can wake them.
TEST_P(small_killed_rank, survivors_waiting_in_it_name_the_victim_within_10s) {
  auto [size, victim] = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "small-loop", "60"},
                {{"CHORUS_TEST_KILL", std::to_string(victim) + ":300"}});
  ASSERT_TRUE(job.wait_for_output(victim, "killing myself", std::chrono::seconds(30))) << job.output(victim);
  auto killed_at = std::chrono::steady_clock::now();
  auto results = job.wait(std::chrono::seconds(10));
  auto elapsed = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(elapsed, std::chrono::seconds(10));
  std::printf("survivors ended %.1f ms after the victim's last words\n",
              std::chrono::duration<double, std::milli>(elapsed).count());
  expect_named(results, victim);
}

INSTANTIATE_TEST_SUITE_P(sizes, small_killed_rank,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(3, 0)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_kill" +
                                  std::to_string(std::get<1>(info.param));
                         });

// SIGKILL from outside, wherever the victim is in its loop of 4 KiB allreduces.
TEST(small_killed_rank_anywhere, the_survivor_names_the_victim_within_10s) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "small-loop", "60"});
  ASSERT_TRUE(job.wait_for_output(1, "iteration 1000", std::chrono::seconds(30))) << job.output(1);
  auto killed_at = std::chrono::steady_clock::now();
  job.kill(1, SIGKILL);
  auto results = job.wait(std::chrono::seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(10));
  expect_named(results, 1);
}

TEST(small_mismatch, every_rank_fails_with_a_protocol_error_saying_what_differs) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "small-mismatch"});
  auto results = job.wait(std::chrono::seconds(20));
  expect_every_rank_failed_with(results, "testrank error: protocol");
  // Its own reading of the other's post, or the first rank's, passed on with the abort.
  expect_every_rank_printed(results, "bytes of f32 sum on rank");
}

// A rank given another CHORUS_CALLER_ALLREDUCE_BYTES would take the I/O thread's path while its
// peer waits in a mailbox, for ever: every rank fails at init instead, naming the variable.
TEST(small_settings, ranks_given_different_caller_bytes_all_fail_at_init_naming_it) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "small-loop", "5"}, {}, 0);
  job.set_rank_env(1, "CHORUS_CALLER_ALLREDUCE_BYTES", "0");
  job.start_rest();
  auto results = job.wait(std::chrono::seconds(30));
  expect_every_rank_failed_with(results,
                                "testrank error: config: CHORUS_CALLER_ALLREDUCE_BYTES is 0 on rank 1 but 4194304 on "
                                "rank 0: every rank of a job must be given the same value");
}

// The same for the pipeline's settings: ranks fusing or cutting tensors differently would run
// chunks of other tensors or bytes against each other. Every rank fails at start, naming it.
TEST(pipeline_settings, ranks_given_different_fusion_thresholds_all_fail_at_start_naming_it) {
  local_job job(2, {CHORUS_TESTRANK_PATH, "pipeline-exact", "1", "1"}, {}, 0);
  job.set_rank_env(1, "CHORUS_FUSION_THRESHOLD", "1048576");
  job.start_rest();
  auto results = job.wait(std::chrono::seconds(30));
  expect_every_rank_failed_with(results, "testrank error: config");
  expect_every_rank_printed(results,
                            "CHORUS_FUSION_THRESHOLD is 1048576 on rank 1 but 67108864 on rank 0: every rank of a job "
                            "must be given the same value");
}

}  // namespace
}  // namespace chorus::testing
