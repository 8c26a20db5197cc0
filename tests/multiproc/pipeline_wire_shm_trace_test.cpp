// fp16 asked for through the C++ API among two processes on one host with shared-memory rings
// (chorus-testrank pipeline-wire-shm, tests/multiproc/rank/pipeline_wire_shm.cpp), traced: by
// default the allreduce and the allgather come back exact and the traces hold no `compressed`
// record (kind 20); with CHORUS_COMPRESSION_SHM=on they come back fp16-rounded and every rank's
// trace holds such records. Both traces replay (chorus-trace replay). Hard time bound per job
// and per trace tool run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"
#include "tests/support/shell_run.hpp"

namespace chorus::testing {
namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// Runs the job with tracing; returns how many `compressed` records each rank's trace holds.
std::vector<std::size_t> traced_job(const std::string& expect, const std::string& shm_setting) {
  char tmpl[] = "/tmp/chorus-wire-shm-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  {
    local_job job(2, {CHORUS_TESTRANK_PATH, "pipeline-wire-shm", expect},
                  {{"CHORUS_TRACE", dir + "/trace"}, {"CHORUS_COMPRESSION_SHM", shm_setting}});
    auto results = job.wait(std::chrono::seconds(90));
    expect_all_passed(results);
    expect_every_rank_printed(results, "wire-shm: pipeline-wire-shm " + expect + " passed");
  }
  // The plan follows the asked compression whatever the links, so the replay matches either way.
  auto replay = run("timeout 60 " + std::string(CHORUS_TRACE_TOOL_PATH) + " replay " + dir + "/trace");
  EXPECT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_EQ(replay.out.rfind("replay matches: ", 0), 0u) << replay.out;
  std::vector<std::size_t> counts;
  for (int r = 0; r < 2; ++r) {
    auto d = run("timeout 60 " + std::string(CHORUS_TRACE_TOOL_PATH) + " dump " + dir + "/trace/rank-" +
                 std::to_string(r) + ".trace");
    EXPECT_EQ(d.exit_code, 0) << d.out;
    EXPECT_GT(count_of(d.out, "\"kind\":\"chunk_end\""), 0u) << "rank " << r << " traced no chunks:\n" << d.out;
    counts.push_back(count_of(d.out, "\"kind\":\"compressed\""));
  }
  std::filesystem::remove_all(dir);
  return counts;
}

TEST(pipeline_wire_shm_trace, fp16_on_shared_memory_runs_uncompressed_and_traces_no_compressed_record) {
  for (auto n : traced_job("exact", "auto")) EXPECT_EQ(n, 0u);
}

TEST(pipeline_wire_shm_trace, fp16_forced_on_shared_memory_rounds_and_traces_compressed_records) {
  for (auto n : traced_job("rounded", "on")) EXPECT_GT(n, 0u);
}

}  // namespace
}  // namespace chorus::testing
