// A real job with the autotuner on (CHORUS_AUTOTUNE=1): 3 ranks of chorus-testrank
// pipeline-exact with windows of one cycle, so the tunables switch many times while 200
// tensors a step are in flight. Every result is exact; rank 0's CSV has a row per sample; the
// trace records the windows and switches (the tunables records that move the gauges change);
// chorus-trace replay reproduces every bucket plan across the switches and finds the ranks'
// autotune records identical. Every process has a hard deadline and is killed by its pid after it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/multiproc/local_job.hpp"
#include "tests/support/child_process.hpp"

namespace chorus::testing {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) { return read_file(path); }

/// chorus-trace with `args`, stdout and stderr together; "" and a failure after 60 s.
std::string chorus_trace(const std::vector<std::string>& args, const std::string& scratch, int& code) {
  std::vector<std::string> argv{CHORUS_TRACE_TOOL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto run = run_bounded(argv, scratch, std::chrono::seconds(60));
  code = run.status.exited ? run.status.exit_code : -1;
  return run.out;
}

TEST(pipeline_autotune, switches_under_traffic_stay_exact_logged_traced_and_replayed) {
  char tmpl[] = "/tmp/chorus-autotune-job-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  const std::string csv = dir + "/autotune.csv", trace = dir + "/trace";
  {
    local_job job(3, {CHORUS_TESTRANK_PATH, "pipeline-exact", "4242", "6"},
                  {{"CHORUS_AUTOTUNE", "1"},
                   {"HOROVOD_AUTOTUNE_LOG", csv},  // the alias works as the name does
                   {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "1"},
                   {"CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE", "1"},
                   {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "4"},
                   {"CHORUS_NUM_STREAMS", "4"},
                   {"CHORUS_TRACE", trace}});
    auto results = job.wait(std::chrono::seconds(100));
    for (auto& r : results) {
      ASSERT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
      ASSERT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
      EXPECT_NE(r.output.find("pipeline-exact: all exact"), std::string::npos) << r.output;
    }
  }
  // The CSV: a header and one row per sample, each with the settings and a positive score.
  std::istringstream rows(slurp(csv));
  std::string line;
  ASSERT_TRUE(std::getline(rows, line));
  EXPECT_EQ(line.rfind("sample,search,phase,cycle,streams,chunk_bytes", 0), 0u) << line;
  int samples = 0;
  while (std::getline(rows, line)) {
    ++samples;
    EXPECT_TRUE(std::regex_match(line, std::regex("[0-9]+,[0-9]+,(search|watch),[0-9]+,[1-4],[0-9]+,[0-9]+,[0-9.]+,[0-9]+,"
                                                  "[0-9.]+(e\\+[0-9]+)?")))
        << line;
  }
  EXPECT_GE(samples, 3) << slurp(csv);

  // The trace: autotune records with switches, and tunables records that differ (the gauges move).
  int code = 0;
  std::string dump = chorus_trace({"dump", trace + "/rank-1.trace"}, dir, code);
  ASSERT_EQ(code, 0) << dump;
  std::regex switched("\"kind\":\"autotune\".*\"switched\":true");
  std::regex chunk("\"kind\":\"tunables\".*\"chunk_bytes\":([0-9]+),\"streams\":([0-9]+)");
  int switches = 0;
  std::set<std::string> settings;
  std::istringstream lines(dump);
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, switched)) ++switches;
    if (std::regex_search(line, m, chunk)) settings.insert(m[1].str() + "/" + m[2].str());
  }
  EXPECT_GE(switches, 2) << "no switches recorded";
  EXPECT_GE(settings.size(), 2u) << "the tunables in force never changed";

  // Replay: the same batches and bucket plans across the switches, the same autotune records.
  std::string replay = chorus_trace({"replay", trace}, dir, code);
  EXPECT_EQ(code, 0) << replay;
  EXPECT_TRUE(std::regex_search(replay, std::regex("^replay matches: [1-9][0-9]* cycles, 1200 tensors, [1-9][0-9]* "
                                                   "autotune windows\n$")))
      << replay;
  std::cout << samples << " samples, " << switches << " switches on rank 1, " << settings.size()
            << " distinct (chunk, streams) settings; " << replay;
  fs::remove_all(dir);
}

// Rank 2 runs its tuner with another seed: its proposal digest differs from the others', and the
// job stops on every rank with the protocol error that names it, instead of diverging. The
// mismatch shows in window 1 (the end of step 0); step 1's tensors may already be agreed by then
// (under TSan they were), so the job runs 4 steps: the later ones must fail.
TEST(pipeline_autotune, a_rank_that_computes_another_proposal_is_named) {
  std::string script = "if [ \"$CHORUS_RANK\" = 2 ]; then export CHORUS_AUTOTUNE_SEED=7; fi; exec \"$0\" \"$@\"";
  local_job job(3, {"/bin/sh", "-c", script, CHORUS_TESTRANK_PATH, "pipeline-exact", "4242", "4"},
                {{"CHORUS_AUTOTUNE", "1"}, {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "1"}});
  auto results = job.wait(std::chrono::seconds(100));
  std::regex named("autotune: ranks computed different proposals for window 1: ranks 0-1 digest [0-9a-f]{16}; "
                   "rank 2 digest [0-9a-f]{16}");
  for (auto& r : results) {
    ASSERT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_FALSE(r.exited && r.exit_code == 0) << "rank " << r.rank << " passed:\n" << r.output;
    EXPECT_TRUE(std::regex_search(r.output, named)) << "rank " << r.rank << ":\n" << r.output;
  }
}

}  // namespace
}  // namespace chorus::testing
