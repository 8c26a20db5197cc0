// Trace replay on the real negotiator and fusion actors (actors/trace_replay.hpp) with the
// comparison of telemetry/trace/replay.hpp: inputs built by hand, so the expected cycles,
// batches and buckets are known. A tensor moved one cycle later on one rank is reported at
// that cycle; the replay is deterministic.
#include "actors/trace_replay.hpp"

#include <gtest/gtest.h>

#include "runtime/collectives/communicator.hpp"

namespace chorus {
namespace {

using namespace telemetry::trace;

tensor_spec spec(std::string name, std::vector<int64_t> shape) {
  return tensor_spec{std::move(name), collective_kind::allreduce, dtype::f32, std::move(shape), reduce_op::sum, -1,
                     device_kind::cpu, 0};
}

/// Two ranks: a in cycle 1 on both; b, c in cycle 2 on rank 0; b in 2 and c in 3 on rank 1;
/// then a again (an id by now) in cycle 4 on both.
replay_input two_ranks() {
  replay_input in;
  in.size = 2;
  in.cycles = 4;
  for (int r = 0; r < 2; ++r) {
    replay_rank rr;
    rr.rank = r;
    rr.tuning.fusion_threshold = 64u << 20;
    rr.tuning.chunk_bytes = 1u << 20;
    rr.tuning.in_place_bytes = 1u << 20;
    uint64_t h = 1;
    rr.ops.push_back({1, h++, spec("a", {4}), 0});
    rr.ops.push_back({2, h++, spec("b", {8}), 0});
    rr.ops.push_back({r == 0 ? 2u : 3u, h++, spec("c", {512, 1024}), 0});  // 2 MiB: in place, 2 chunks
    rr.ops.push_back({4, h++, spec("a", {4}), 0});
    in.ranks.push_back(std::move(rr));
  }
  return in;
}

TEST(TraceReplay, RunsTheRealActorsCycleByCycle) {
  auto in = two_ranks();
  auto got = replay_trace(in);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->size(), 2u);
  const uint64_t base = data_plane::pipeline_sequence_base;
  for (const auto& d : *got) {
    EXPECT_EQ(d.cycles, (std::vector<uint64_t>{1, 2, 3, 4}));
    ASSERT_EQ(d.agreed.size(), 4u);
    EXPECT_EQ(d.agreed.at(1), std::vector<std::string>{"a"});
    EXPECT_EQ(d.agreed.at(2), std::vector<std::string>{"b"});
    EXPECT_EQ(d.agreed.at(3), std::vector<std::string>{"c"});
    EXPECT_EQ(d.agreed.at(4), std::vector<std::string>{"a"});
    ASSERT_EQ(d.buckets.size(), 4u);
    EXPECT_EQ(d.buckets[2].cycle, 3u);
    EXPECT_EQ(d.buckets[2].tensors, std::vector<std::string>{"c"});
    EXPECT_TRUE(d.buckets[2].in_place);
    EXPECT_EQ(d.buckets[2].chunks, 2u);
    EXPECT_EQ(d.buckets[2].first_sequence, base + 2);
    EXPECT_EQ(d.buckets[3].first_sequence, base + 4);
  }
}

TEST(TraceReplay, MatchesItsOwnDecisionsAndNamesTheFirstDifference) {
  auto in = two_ranks();
  auto got = replay_trace(in);
  ASSERT_TRUE(got.ok());
  for (std::size_t r = 0; r < 2; ++r) in.ranks[r].recorded = (*got)[r];
  auto same = compare(in, *replay_trace(in));
  EXPECT_TRUE(same.match) << same.text();
  EXPECT_EQ(same.text(), "replay matches: 4 cycles, 4 tensors");

  // c one cycle later on rank 1: the recording (the first replay) agreed it in cycle 3.
  auto moved = in;
  moved.ranks[1].ops[2].cycle = 4;
  auto v = compare(moved, *replay_trace(moved));
  EXPECT_FALSE(v.match);
  EXPECT_EQ(v.text(), "replay differs at cycle 3, rank 0: the cycle: expected to run, got no cycle (no rank had "
                      "anything new for it)");

  // b one cycle later on rank 1: cycle 3 still runs (c), but b is agreed there.
  auto late = in;
  late.ranks[1].ops[1].cycle = 3;
  auto w = compare(late, *replay_trace(late));
  EXPECT_FALSE(w.match);
  EXPECT_EQ(w.text(), "replay differs at cycle 2, rank 0: agreed batch: expected [b], got []");
}

TEST(TraceReplay, ABucketPlanThatDiffersIsReported) {
  // b and c agreed together: c (2 MiB) is a bucket of its own at in_place_bytes = 1 MiB.
  auto in = two_ranks();
  in.cycles = 3;
  in.ranks[1].ops[2].cycle = 2;
  for (auto& rr : in.ranks) rr.ops[3].cycle = 3;
  auto got = replay_trace(in);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ((*got)[1].buckets.size(), 4u);
  for (std::size_t r = 0; r < 2; ++r) in.ranks[r].recorded = (*got)[r];
  in.ranks[1].tuning.in_place_bytes = 0;  // rank 1 now fuses b and c into one bucket
  auto v = compare(in, *replay_trace(in));
  EXPECT_FALSE(v.match);
  EXPECT_EQ(v.text().rfind("replay differs at cycle 2, rank 1: bucket 1 of the cycle: expected {allreduce [b], 32 bytes, "
                           "1 chunks",
                           0),
            0u)
      << v.text();
  EXPECT_NE(v.text().find("got {allreduce [b, c], "), std::string::npos) << v.text();
}

TEST(TraceReplay, AnUnknownStrategyIsAConfigError) {
  auto got = replay_trace(two_ranks(), "carrier-pigeon");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), errc::config);
}

}  // namespace
}  // namespace chorus
