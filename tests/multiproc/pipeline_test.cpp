// The whole pipeline across real processes (N = 2, 3, 4 on 127.0.0.1), driven through the C++
// API by chorus-testrank's pipeline modes (tests/multiproc/rank/pipeline_*.cpp): exact results
// for 200 mixed tensors in per-rank random orders; the stall warning names the missing ranks;
// a spec mismatch fails on every rank with the same text; shutdown ends pending operations
// with an error; a killed rank makes the others fail naming it, without a hang.
// Seeds: CHORUS_TEST_SEED=<n> re-runs a failed randomised case.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

class pipeline_exact : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_exact, two_hundred_tensors_in_random_orders_are_exact_on_every_rank) {
  const int size = GetParam();
  const uint64_t seed = job_seed("pipeline_exact", size);
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-exact", std::to_string(seed), "2"});
  auto results = job.wait(std::chrono::seconds(100));
  std::string context = "seed=" + std::to_string(seed) + ": ";
  expect_all_passed(results, context);
  expect_every_rank_printed(results, "pipeline-exact: all exact", context);
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_exact, ::testing::Values(2, 3, 4), size_name);

struct stall_case {
  int size;
  std::string late;     // ranks that enqueue 'stall.grad' late
  std::string ready;    // how the warning names the others
  std::string missing;  // how it names the late ranks
};

class pipeline_stall : public ::testing::TestWithParam<stall_case> {};

TEST_P(pipeline_stall, warning_names_the_ranks_that_did_not_produce_the_tensor) {
  const auto& c = GetParam();
  local_job job(c.size, {CHORUS_TESTRANK_PATH, "pipeline-stall", c.late, "4"},
                {{"CHORUS_STALL_CHECK_TIME_SECONDS", "1"}});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  const std::string warning = "stall: allreduce('stall.grad'): ready on " + c.ready + " but not produced by " +
                              c.missing + " after 1 s (CHORUS_STALL_CHECK_TIME_SECONDS)";
  for (auto& r : results) {
    // The same words on every rank, once per wait.
    EXPECT_EQ(count(r.output, warning), 1u)
        << "rank " << r.rank << " should warn once with\n  " << warning << "\noutput:\n"
        << r.output;
    EXPECT_EQ(count(r.output, "stall.warmup"), 0u) << "no warning for a tensor that was never stalled:\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(cases, pipeline_stall,
                         ::testing::Values(stall_case{2, "1", "rank 0", "rank 1"},
                                           stall_case{3, "2", "ranks 0-1", "rank 2"},
                                           stall_case{4, "1,3", "ranks 0,2", "ranks 1,3"}),
                         [](const auto& info) { return "n" + std::to_string(info.param.size); });

class pipeline_mismatch : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_mismatch, every_rank_gets_the_same_error_naming_tensor_field_and_ranks) {
  const int size = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-mismatch"});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  // The largest group is the reference; on a tie (N = 2) the group with the lowest rank.
  const std::string shape_error = "mismatch error: mismatch: allreduce('mismatch.shape'): shape [4,3] on " +
                                  rank_run(size - 1, size - 1) + " but [4,2] on " + rank_run(0, size - 2);
  const std::string dtype_error =
      size == 2 ? "mismatch error: mismatch: allreduce('mismatch.dtype'): dtype f32 on rank 1 but f64 on rank 0"
                : "mismatch error: mismatch: allreduce('mismatch.dtype'): dtype f64 on rank 0 but f32 on " +
                      rank_run(1, size - 1);
  expect_every_rank_printed(results, shape_error);
  expect_every_rank_printed(results, dtype_error);
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_mismatch, ::testing::Values(2, 3, 4), size_name);

class pipeline_shutdown : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_shutdown, pending_operations_each_end_once_with_an_error) {
  local_job job(GetParam(), {CHORUS_TESTRANK_PATH, "pipeline-shutdown"});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  for (auto& r : results) {
    EXPECT_NE(r.output.find("pipeline-shutdown ok"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("still pending on this rank"), std::string::npos) << "duplicate name:\n" << r.output;
    EXPECT_NE(r.output.find("wait: timeout"), std::string::npos) << "wait with a timeout:\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_shutdown, ::testing::Values(2, 3, 4), size_name);

class pipeline_killed_rank : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Every survivor fails within the bound with an error that names the killed rank and no other
// rank but itself: a survivor that saw the death first relays it before it leaves, so nobody
// blames the messenger (pipeline_failure_test.cpp covers more kill points and a frozen rank).
TEST_P(pipeline_killed_rank, survivors_fail_naming_it_without_a_hang) {
  auto [size, victim] = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-loop", "90"});
  if (!job.wait_for_output(victim, "iteration 3", std::chrono::seconds(40))) {
    for (int r = 0; r < size; ++r)
      ADD_FAILURE() << "no iteration 3 before the kill; rank " << r << ":\n" << job.output(r);
    return;
  }
  auto killed_at = std::chrono::steady_clock::now();
  job.kill(victim, SIGKILL);
  auto results = job.wait(std::chrono::seconds(15));
  // Survivors leave within moments: under the 5 s goodbye grace of the data plane's close, which
  // only a connection that never settles waits out.
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(4));
  for (auto& r : results) {
    if (r.rank == victim) continue;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung after rank " << victim << " died:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 3) << "rank " << r.rank << ":\n" << r.output;
    auto at = r.output.find("testrank error: ");
    ASSERT_NE(at, std::string::npos) << r.output;
    auto line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_EQ(named_ranks(line, r.rank), std::set<int>{victim}) << "rank " << r.rank << ": " << line;
  }
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_killed_rank,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(3, 1), std::make_tuple(4, 0)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_kill" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace chorus::testing
