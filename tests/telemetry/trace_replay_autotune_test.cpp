// Replay's autotune check (telemetry/trace/replay.hpp: compare): ranks whose recorded autotune
// windows differ (another switch, score or digest) are reported with the window and the rank.
#include <gtest/gtest.h>

#include "telemetry/trace/replay.hpp"

namespace chorus::telemetry::trace {
namespace {

replay_input two_ranks(const autotune_event& a, const autotune_event& b) {
  replay_input in;
  in.size = 2;
  in.cycles = 0;  // no cycles to compare: only the autotune records
  for (int r = 0; r < 2; ++r) {
    replay_rank rr;
    rr.rank = r;
    rr.autotune.push_back(r == 0 ? a : b);
    in.ranks.push_back(rr);
  }
  return in;
}

autotune_event window(uint64_t w, bool switched, std::size_t chunk) {
  autotune_event e;
  e.cycle = 10 * w;
  e.window = w;
  e.score = 1e9;
  e.switched = switched;
  e.in_force.chunk_bytes = chunk;
  e.in_force.streams = 2;
  e.digest = 77;
  return e;
}

TEST(ReplayAutotune, IdenticalRecordsMatchAndAreCounted) {
  auto v = compare(two_ranks(window(1, true, 1 << 20), window(1, true, 1 << 20)), {{}, {}});
  EXPECT_TRUE(v.match) << v.text();
  EXPECT_EQ(v.text(), "replay matches: 0 cycles, 0 tensors, 1 autotune windows");
}

TEST(ReplayAutotune, AnotherSwitchOnOneRankIsReported) {
  auto v = compare(two_ranks(window(3, true, 1 << 20), window(3, true, 2 << 20)), {{}, {}});
  EXPECT_FALSE(v.match);
  EXPECT_NE(v.difference.find("cycle 30, rank 1: autotune window 3 (as rank 0)"), std::string::npos) << v.difference;
  EXPECT_NE(v.difference.find("chunk 1048576"), std::string::npos) << v.difference;
  EXPECT_NE(v.difference.find("chunk 2097152"), std::string::npos) << v.difference;
}

}  // namespace
}  // namespace chorus::telemetry::trace
