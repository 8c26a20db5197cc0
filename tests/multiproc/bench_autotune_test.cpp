// chorus-bench autotune across two real processes with a tiny grid and few steps: it runs both
// pipelines (fixed and autotuned) to the end, checks every step's result itself, writes the
// autotune CSV, and prints well-formed RESULT autotune / autotune_cost lines. No timing is
// asserted: the numbers belong to ./chorus.sh bench-autotune.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

TEST(bench_autotune, a_tiny_run_prints_well_formed_results_and_a_log) {
  char tmpl[] = "/tmp/chorus-autotune-test-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string log = dir + "/autotune.csv";
  local_job job(2,
                {CHORUS_BENCH_PATH, "autotune", "--grid-streams", "1,2", "--grid-chunks", "256K", "--grid-fusion",
                 "1M", "--grid-steps", "1", "--steps", "1", "--max-steps", "8", "--cost-steps", "1"},
                {{"CHORUS_NUM_STREAMS", "2"},
                 {"CHORUS_AUTOTUNE_LOG", log},
                 {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "1"},
                 {"CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE", "1"},
                 {"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "1"},
                 {"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "2"}});
  auto results = job.wait(std::chrono::seconds(60));
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
  }
  const auto& out = results.at(0).output;
  const std::string ms = "[0-9]+\\.[0-9]{2}";
  EXPECT_TRUE(std::regex_search(out, std::regex("RESULT autotune 2 " + ms + " " + ms + " " + ms + " -?[0-9]+\n")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("RESULT autotune_cost 2 " + ms + " " + ms + "\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("# grid  2: streams=2 chunk=256K fusion=1024K"))) << out;
  EXPECT_EQ(results.at(1).output.find("RESULT"), std::string::npos) << "only rank 0 prints results";
  std::ifstream in(log);
  std::string header, row;
  ASSERT_TRUE(std::getline(in, header)) << "no autotune log at " << log;
  EXPECT_EQ(header.rfind("sample,", 0), 0u) << header;
  EXPECT_TRUE(std::getline(in, row)) << "the autotune log has no sample row";
  int rc = std::system(("rm -rf '" + dir + "'").c_str());
  (void)rc;
}

}  // namespace
}  // namespace chorus::testing
