// Priority across real processes (2 ranks on 127.0.0.1, TCP only so that no mailbox lane runs
// chunks in hand-out order; one stream, one chunk in flight, a start window of one):
// chorus-testrank pipeline-priority enqueues a 64 MiB tensor of priority 0, then, once a gate
// tensor shows it was agreed, a 1 MiB tensor of priority 100. The later tensor ends first on
// every rank, and rank 0's trace shows its chunk starting before the big bucket's last chunk;
// with CHORUS_PRIORITY=0 it ends last; chorus-trace replay plans the same buckets from the
// recorded priorities. No timing threshold: the order is what is asserted (a
// run in which the big tensor ended before the later one was even enqueued is skipped).
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"
#include "tests/support/child_process.hpp"

namespace chorus::testing {
namespace {

struct run_outcome {
  bool pending = true;   // on every rank, the big tensor was pending when the later one was enqueued
  bool overtook = true;  // on every rank, the later tensor ended first
  std::string dump;      // rank 0's trace (chorus-trace dump)
  std::string replay;    // chorus-trace replay of both ranks' traces
  int replay_code = -1;
};

run_outcome run_job(const std::string& priority) {
  char tmpl[] = "/tmp/chorus-priority-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  run_outcome out;
  {
    local_job job(2, {CHORUS_TESTRANK_PATH, "pipeline-priority"},
                  {{"CHORUS_PRIORITY", priority},
                   {"CHORUS_SHM_BYTES", "0"},
                   {"CHORUS_NUM_STREAMS", "1"},
                   {"CHORUS_CHUNKS_IN_FLIGHT", "1"},
                   {"CHORUS_START_WINDOW", "1"},
                   {"CHORUS_CHUNK_BYTES", "262144"},
                   {"CHORUS_TRACE", dir + "/trace"}});
    auto results = job.wait(std::chrono::seconds(90));
    expect_all_passed(results);
    for (auto& r : results) {
      out.pending &= r.output.find("big pending at enqueue yes") != std::string::npos;
      out.overtook &= r.output.find("first ended before big yes") != std::string::npos;
    }
  }
  auto run = run_bounded({CHORUS_TRACE_TOOL_PATH, "dump", dir + "/trace/rank-0.trace"}, dir, std::chrono::seconds(60));
  EXPECT_TRUE(run.status.exited && run.status.exit_code == 0) << run.out;
  out.dump = run.out;
  // The replay plans every batch again from the recorded specs, priorities included.
  auto replay = run_bounded({CHORUS_TRACE_TOOL_PATH, "replay", dir + "/trace"}, dir, std::chrono::seconds(60));
  out.replay = replay.out;
  out.replay_code = replay.status.exited ? replay.status.exit_code : -1;
  std::filesystem::remove_all(dir);
  return out;
}

/// From a trace dump: when each chunk sequence started (µs), and each tensor's bucket's
/// [first sequence, first + chunks).
struct trace_view {
  std::map<uint64_t, double> started;
  std::map<std::string, std::pair<uint64_t, uint64_t>> bucket_of;
};

trace_view read_view(const std::string& dump) {
  trace_view v;
  std::regex start("\"t_us\":([0-9.e+]+),\"kind\":\"chunk_start\".*\"sequence\":([0-9]+)");
  std::regex bucket("\"kind\":\"bucket\".*\"first_sequence\":([0-9]+),\"chunks\":([0-9]+).*\"tensors\":\\[\"([^\"]+)\"");
  std::istringstream lines(dump);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, start)) v.started[std::stoull(m[2])] = std::stod(m[1]);
    if (std::regex_search(line, m, bucket)) {
      const uint64_t first = std::stoull(m[1]);
      v.bucket_of[m[3]] = {first, first + std::stoull(m[2])};
    }
  }
  return v;
}

TEST(pipeline_priority, a_later_tensor_of_larger_priority_overtakes_a_big_bucket) {
  auto on = run_job("1");
  EXPECT_EQ(on.replay_code, 0) << on.replay;
  EXPECT_NE(on.replay.find("replay matches"), std::string::npos) << on.replay;
  if (!on.pending) GTEST_SKIP() << "the big tensor ended before the later one was enqueued: nothing to overtake";
  EXPECT_TRUE(on.overtook) << "the later tensor of priority 100 did not end before the big one";
  auto v = read_view(on.dump);
  ASSERT_TRUE(v.bucket_of.count("prio.big") && v.bucket_of.count("prio.first")) << on.dump.substr(0, 4000);
  auto [big_first, big_end] = v.bucket_of["prio.big"];
  auto [first, first_end] = v.bucket_of["prio.first"];
  EXPECT_EQ(big_end - big_first, 256u);  // 64 MiB in 256 KiB chunks
  EXPECT_GT(first, big_end - 1);         // planned after every chunk of the big bucket...
  ASSERT_TRUE(v.started.count(first) && v.started.count(big_end - 1));
  EXPECT_LT(v.started[first], v.started[big_end - 1]);  // ...yet started before its last one
  (void)first_end;
}

TEST(pipeline_priority, with_priority_off_the_later_tensor_waits_for_the_big_one) {
  auto off = run_job("0");
  EXPECT_FALSE(off.overtook) << "with CHORUS_PRIORITY=0 a later tensor ended before the big one";
  auto v = read_view(off.dump);
  ASSERT_TRUE(v.bucket_of.count("prio.big") && v.bucket_of.count("prio.first"));
  auto [big_first, big_end] = v.bucket_of["prio.big"];
  const uint64_t first = v.bucket_of["prio.first"].first;
  ASSERT_TRUE(v.started.count(first) && v.started.count(big_end - 1));
  EXPECT_GT(v.started[first], v.started[big_end - 1]);
  (void)big_first;
}

}  // namespace
}  // namespace chorus::testing
