// chorus-bench allreduce across real processes: every implementation it measures (Chorus, the
// bare-socket floor, Gloo when built with it) prints its RESULT line for every size; so does
// chorus-bench allgather for auto, hierarchical and flat. The bench
// checks each iteration's result itself and exits non-zero on a wrong element, so a floor or a
// Chorus that sums wrongly fails here too.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

int count_results(const std::string& out, const std::string& impl, const std::string& bytes) {
  std::regex line("RESULT " + impl + " 2 " + bytes + " [0-9]+ [0-9.]+ [0-9.]+ [0-9.]+ [0-9.]+");
  return static_cast<int>(std::distance(std::sregex_iterator(out.begin(), out.end(), line), std::sregex_iterator()));
}

TEST(bench_allreduce, every_implementation_reports_a_checked_result_per_size) {
  // Odd byte counts give the two halves of the floor's ring different lengths.
  local_job job(2, {CHORUS_BENCH_PATH, "allreduce", "--impl", "all", "--sizes", "4,12,4K,1M"});
  auto results = job.wait(std::chrono::seconds(90));
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
  }
  const auto& out = results.at(0).output;
  for (const char* bytes : {"4", "12", "4096", "1048576"}) {
    EXPECT_EQ(count_results(out, "chorus_tcp", bytes), 1) << out;
    EXPECT_EQ(count_results(out, "tcp_floor", bytes), 1) << out;
  }
  EXPECT_EQ(results.at(1).output.find("RESULT"), std::string::npos) << "only rank 0 prints results";
}

TEST(bench_allgather, auto_hierarchical_and_flat_report_a_checked_result_per_size) {
  // One host: all three run the flat ring (no hierarchy to use), each checked by the bench.
  local_job job(2, {CHORUS_BENCH_PATH, "allgather", "--sizes", "8,4K,1M"});
  auto results = job.wait(std::chrono::seconds(90));
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
  }
  const auto& out = results.at(0).output;
  EXPECT_NE(out.find("auto runs ring_allgather"), std::string::npos) << out;
  for (const char* bytes : {"8", "4096", "1048576"})
    for (const char* impl : {"chorus_allgather_tcp", "chorus_hier_allgather_tcp", "chorus_flat_allgather_tcp"})
      EXPECT_EQ(count_results(out, impl, bytes), 1) << impl << " " << bytes << "\n" << out;
}

TEST(bench_allreduce, an_unknown_implementation_is_refused_with_the_choices) {
  local_job job(2, {CHORUS_BENCH_PATH, "allreduce", "--impl", "mpi"});
  auto results = job.wait(std::chrono::seconds(30));
  for (auto& r : results) {
    EXPECT_TRUE(r.exited && r.exit_code == 2) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("--impl must be chorus, gloo, floor, both or all"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace chorus::testing
