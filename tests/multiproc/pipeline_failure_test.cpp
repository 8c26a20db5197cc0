// A rank SIGKILLed while the actor pipeline has allreduces in flight on several streams (one
// generation in negotiation, one on the data plane): every op still pending on every survivor
// ends within the bound, and each error names the tensor and the killed rank, and no other
// rank but the survivor itself ("... on rank 2: rank 1 ..."). A survivor must not blame the
// messenger: a peer that stopped because of the death, or whose goodbye arrived first.
// Variants freeze one survivor (SIGSTOP) for 1.5 s across the kill: the others notice, fail and
// leave first, and the frozen one then sees the death and their departures all at once.
// Runs in tests/multiproc/rank/pipeline_failure.cpp (mode pipeline-kill-loop). Every rank is on
// this host, so the allreduce chunks take the pipeline's direct path (mailboxes, its own thread:
// runtime/collectives/mailbox_queue.hpp); rank 0's init log says so, and a variant keeps them on
// the I/O thread's path (CHORUS_CALLER_ALLREDUCE_BYTES=0).
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <thread>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

const std::string direct_said = "the pipeline's plain allreduce chunks as large run on a thread of their own";

class pipeline_failure : public ::testing::TestWithParam<std::tuple<int, int, int, bool>> {};

TEST_P(pipeline_failure, every_pending_op_on_every_survivor_names_the_killed_rank) {
  auto [size, victim, frozen, direct] = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-kill-loop", "90"},
                {{"CHORUS_NUM_STREAMS", "3"},
                 {"CHORUS_CHUNK_BYTES", "262144"},
                 {"CHORUS_FUSION_THRESHOLD", "1048576"},
                 {"CHORUS_LOG_LEVEL", "info"},
                 {"CHORUS_CALLER_ALLREDUCE_BYTES", direct ? "4194304" : "0"}});
  if (!job.wait_for_output(victim, "iteration 3", std::chrono::seconds(40))) {
    for (int r = 0; r < size; ++r) ADD_FAILURE() << "no iteration 3 before the kill; rank " << r << ":\n" << job.output(r);
    return;
  }
  auto killed_at = std::chrono::steady_clock::now();
  if (frozen >= 0) job.kill(frozen, SIGSTOP);
  job.kill(victim, SIGKILL);
  if (frozen >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    job.kill(frozen, SIGCONT);
  }
  auto results = job.wait(std::chrono::seconds(20));
  auto elapsed = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(elapsed, std::chrono::seconds(20));
  const std::set<int> want = {victim};
  const std::string victim_name = "rank " + std::to_string(victim);
  for (auto& r : results) {
    if (r.rank == 0) EXPECT_EQ(r.output.find(direct_said) != std::string::npos, direct) << r.output;
    if (r.rank == victim) continue;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung after rank " << victim << " died:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 3) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("ops hung: 0"), std::string::npos) << "rank " << r.rank << ":\n" << r.output;
    int op_errors = 0, errors = 0;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      bool op = starts_with(line, "op error: "), late = starts_with(line, "late op error: ");
      if (!op && !late && !starts_with(line, "testrank error: ")) continue;
      ++errors;
      op_errors += op;
      EXPECT_EQ(named_ranks(line, r.rank), want)
          << "rank " << r.rank << " blames the wrong rank (rank " << victim << " was killed):\n  " << line
          << "\nwhole output:\n"
          << r.output;
      EXPECT_NE(line.find("connection_lost"), std::string::npos) << "rank " << r.rank << ":\n  " << line;
      if (op) EXPECT_NE(line.find("('kill."), std::string::npos) << "no tensor named:\n  " << line;
      if (late) EXPECT_NE(line.find("('kill.late')"), std::string::npos) << "no tensor named:\n  " << line;
    }
    EXPECT_GE(op_errors, 1) << "rank " << r.rank << " reported no pending op:\n" << r.output;
    EXPECT_GE(errors, 3) << "rank " << r.rank << ":\n" << r.output;
  }
}

// A rank frozen with SIGSTOP (alive to the kernel, which still acknowledges its bytes, but its
// runtime silent) is declared lost by its heartbeats' absence: every pending op on every other
// rank ends within CHORUS_PEER_TIMEOUT_SECONDS + 5 s, naming it.
class frozen_rank : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(frozen_rank, every_pending_op_names_it_within_the_peer_timeout) {
  auto [size, victim] = GetParam();
  local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-kill-loop", "90"},
                {{"CHORUS_NUM_STREAMS", "2"}, {"CHORUS_PEER_TIMEOUT_SECONDS", "2"}});
  if (!job.wait_for_output(victim, "iteration 3", std::chrono::seconds(40))) {
    for (int r = 0; r < size; ++r) ADD_FAILURE() << "no iteration 3 before the freeze; rank " << r << ":\n" << job.output(r);
    return;
  }
  auto frozen_at = std::chrono::steady_clock::now();
  job.kill(victim, SIGSTOP);
  auto results = job.wait(std::chrono::seconds(7), victim);  // the victim is SIGKILLed afterwards
  auto elapsed = std::chrono::steady_clock::now() - frozen_at;
  EXPECT_LT(elapsed, std::chrono::seconds(7));
  const std::set<int> want = {victim};
  for (auto& r : results) {
    if (r.rank == victim) continue;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung after rank " << victim << " froze:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 3) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("ops hung: 0"), std::string::npos) << "rank " << r.rank << ":\n" << r.output;
    int op_errors = 0;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      if (!starts_with(line, "op error: ")) continue;
      ++op_errors;
      EXPECT_EQ(named_ranks(line, r.rank), want) << "rank " << r.rank << ":\n  " << line;
      EXPECT_NE(line.find("('kill."), std::string::npos) << "no tensor named:\n  " << line;
    }
    EXPECT_GE(op_errors, 1) << "rank " << r.rank << " reported no pending op:\n" << r.output;
    EXPECT_NE(r.output.find("rank " + std::to_string(victim) + " sent nothing"), std::string::npos)
        << "rank " << r.rank << ":\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(freezes, frozen_rank,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(3, 0)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_freeze" +
                                  std::to_string(std::get<1>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(kills, pipeline_failure,
                         ::testing::Values(std::make_tuple(3, 1, -1, true), std::make_tuple(3, 0, -1, true),
                                           std::make_tuple(3, 2, -1, true), std::make_tuple(4, 1, -1, true),
                                           std::make_tuple(4, 2, -1, true), std::make_tuple(4, 0, -1, true),
                                           std::make_tuple(4, 1, 2, true), std::make_tuple(3, 0, 2, true),
                                           std::make_tuple(3, 1, 0, true), std::make_tuple(4, 0, 3, true),
                                           std::make_tuple(3, 1, -1, false), std::make_tuple(4, 0, 3, false)),
                         [](const auto& info) {
                           const int frozen = std::get<2>(info.param);
                           return "n" + std::to_string(std::get<0>(info.param)) + "_kill" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (frozen >= 0 ? "_freeze" + std::to_string(frozen) : std::string()) +
                                  (std::get<3>(info.param) ? "" : "_io_thread");
                         });

}  // namespace
}  // namespace chorus::testing
