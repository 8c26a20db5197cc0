// Hierarchical allreduce and allgather across real processes on 127.0.0.1, hosts faked per rank with
// CHORUS_HOST_ID (chorus-testrank's CHORUS_TEST_HOSTS): 2x2, 2+1 and 3x1 (where auto must run
// the flat algorithms), every dtype and reduce op, sizes 0, 1, odd and several chunks; the
// actor pipeline with the hierarchy forced on; a rank killed in the middle of either named by
// every other rank. (tests/hosts/hier_hosts_test.cpp runs the same across emulated hosts.)
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

struct hier_layout {
  std::string hosts;   // CHORUS_TEST_HOSTS
  int size;
  std::string groups;  // how the ranks print them
  std::string large;   // what auto runs at 64 MiB
  std::string gather;  // what auto runs for an allgather
};

void PrintTo(const hier_layout& p, std::ostream* os) { *os << "hosts " << p.hosts; }

class hier_across_processes : public ::testing::TestWithParam<hier_layout> {};

TEST_P(hier_across_processes, forced_and_auto_are_exact_for_every_dtype_and_op) {
  const auto& p = GetParam();
  // 4 KiB frames: a 64 KiB chunk's shards go across hosts and back segment by segment while
  // the host still reduces or gathers the others (hier_readiness.hpp).
  local_job job(p.size, {CHORUS_TESTRANK_PATH, "hier"},
                {{"CHORUS_TEST_HOSTS", p.hosts},
                 {"CHORUS_CHUNK_BYTES", "65536"},
                 {"CHORUS_SEGMENT_BYTES", "4096"},
                 {"CHORUS_NUM_STREAMS", "2"}});
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  expect_every_rank_printed(results, "testrank: hosts " + p.groups + "; auto runs recursive_doubling at 4 KiB and " +
                                         p.large + " at 64 MiB");
  expect_every_rank_printed(results, "testrank: allgather auto runs " + p.gather);
  for (auto& r : results)
    EXPECT_NE(r.output.find("hier exact on rank " + std::to_string(r.rank)), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(layouts, hier_across_processes,
                         ::testing::Values(hier_layout{"2,2", 4, "2 hosts: [0,1] [2,3]", "hier_sharded", "hier_allgather"},
                                           hier_layout{"2,1", 3, "2 hosts: [0,1] [2]", "hier_sharded", "hier_allgather"},
                                           hier_layout{"1,1,1", 3, "3 hosts: [0] [1] [2]", "ring", "ring_allgather"}),
                         [](const auto& info) {
                           std::string s = info.param.hosts;
                           for (auto& ch : s)
                             if (ch == ',') ch = '_';
                           return "hosts_" + s;
                         });

struct chunk_case {
  std::string hosts;        // CHORUS_TEST_HOSTS; empty: one host
  std::string configured;   // CHORUS_CHUNK_BYTES; empty: not set
  std::string expected;     // the pipeline's chunk size
  int size = 2;
  std::string hierarchical = "";  // CHORUS_HIERARCHICAL; empty: not set
};

void PrintTo(const chunk_case& c, std::ostream* os) {
  *os << "hosts '" << c.hosts << "' chunk '" << c.configured << "' hierarchical '" << c.hierarchical << "'";
}

class cross_host_chunks : public ::testing::TestWithParam<chunk_case> {};

// CHORUS_CHUNK_BYTES not set: 4 MiB chunks on one host and in the hierarchical allreduce (which
// sends each across hosts in parts), 1 MiB where flat rings cross hosts (a chunk on a slow
// connection then holds an operation a quarter as long); a value set is kept anywhere.
TEST_P(cross_host_chunks, default_is_lower_where_flat_rings_cross_hosts_and_a_set_value_is_kept) {
  const auto& c = GetParam();
  const uint64_t seed = job_seed("cross_host_chunks", 2);
  local_job::env_map env{{"CHORUS_LOG_LEVEL", "info"}};
  if (!c.hosts.empty()) env["CHORUS_TEST_HOSTS"] = c.hosts;
  if (!c.configured.empty()) env["CHORUS_CHUNK_BYTES"] = c.configured;
  if (!c.hierarchical.empty()) env["CHORUS_HIERARCHICAL"] = c.hierarchical;
  local_job job(c.size, {CHORUS_TESTRANK_PATH, "pipeline-exact", std::to_string(seed), "1"}, env);
  auto results = job.wait(std::chrono::seconds(60));
  const std::string context = "seed=" + std::to_string(seed) + ": ";
  expect_all_passed(results, context);
  expect_every_rank_printed(results, "pipeline-exact: all exact", context);
  expect_every_rank_printed(results, " chunk_bytes=" + c.expected + " ", context);
}

INSTANTIATE_TEST_SUITE_P(cases, cross_host_chunks,
                         ::testing::Values(chunk_case{"", "", "4194304"}, chunk_case{"1,1", "", "1048576"},
                                           chunk_case{"1,1", "2097152", "2097152"},
                                           chunk_case{"", "2097152", "2097152"},
                                           chunk_case{"2,2", "", "4194304", 4},
                                           chunk_case{"2,2", "", "1048576", 4, "off"}),
                         [](const auto& info) {
                           const auto& p = info.param;
                           return (p.hosts.empty() ? std::string("one_host") : "hosts_" + std::to_string(p.size)) +
                                  (p.configured.empty() ? "_default" : "_set") +
                                  (p.hierarchical.empty() ? "" : "_hier_" + p.hierarchical);
                         });

TEST(hier_pipeline, mixed_tensors_through_fusion_and_senders_are_exact) {
  const uint64_t seed = job_seed("hier_pipeline", 4);
  local_job job(4, {CHORUS_TESTRANK_PATH, "pipeline-exact", std::to_string(seed), "2"},
                {{"CHORUS_TEST_HOSTS", "2,2"}, {"CHORUS_HIERARCHICAL", "on"}, {"CHORUS_CHUNK_BYTES", "65536"}});
  auto results = job.wait(std::chrono::seconds(100));
  std::string context = "seed=" + std::to_string(seed) + ": ";
  expect_all_passed(results, context);
  expect_every_rank_printed(results, "pipeline-exact: all exact", context);
}

class hier_killed_rank : public ::testing::TestWithParam<std::string> {};

TEST_P(hier_killed_rank, survivors_fail_naming_it_within_10s) {
  const int victim = 3;
  local_job job(4, {CHORUS_TESTRANK_PATH, GetParam(), "60"}, {{"CHORUS_TEST_HOSTS", "2,2"}});
  ASSERT_TRUE(job.wait_for_output(victim, "iteration 3", std::chrono::seconds(30))) << job.output(victim);
  auto killed_at = std::chrono::steady_clock::now();
  job.kill(victim, SIGKILL);
  auto results = job.wait(std::chrono::seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(10));
  for (auto& r : results) {
    if (r.rank == victim) continue;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung after rank " << victim << " died:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 3) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("testrank error: connection_lost"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rank " + std::to_string(victim)), std::string::npos) << r.output;
  }
}

// The hierarchical allreduce and the hierarchical allgather.
INSTANTIATE_TEST_SUITE_P(loops, hier_killed_rank, ::testing::Values("hier-loop", "hier-gather-loop"),
                         [](const auto& info) { return info.param == "hier-loop" ? "allreduce" : "allgather"; });

}  // namespace
}  // namespace chorus::testing
