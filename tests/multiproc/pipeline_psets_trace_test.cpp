// A traced job with process sets (chorus-testrank pipeline-psets, N = 3, CHORUS_TRACE on) replays
// exactly: chorus-trace rebuilds the sets from the recorded tensors (their members are the ranks
// that enqueued them) and plans every rank's buckets, the bystanders' included, alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"
#include "tests/support/shell_run.hpp"

namespace chorus::testing {
namespace {

TEST(pipeline_psets_trace, replay_of_a_job_with_process_sets_matches) {
  char tmpl[] = "/tmp/chorus-psets-trace-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  {
    local_job job(3, {CHORUS_TESTRANK_PATH, "pipeline-psets", "4242"}, {{"CHORUS_TRACE", dir + "/trace"}});
    auto results = job.wait(std::chrono::seconds(90));
    expect_all_passed(results);
  }
  auto r = run("timeout 60 " + std::string(CHORUS_TRACE_TOOL_PATH) + " replay " + dir + "/trace");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("replay matches: ", 0), 0u) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chorus::testing
