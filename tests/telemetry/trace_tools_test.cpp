// The chorus-trace tools' logic (telemetry/trace/): on two ranks' recordings made here with
// chosen times, the straggler report names the late rank per tensor and per cycle, the dump
// decodes control messages, the timeline holds every kind of span, and the replay input
// carries each rank's ready cycles, agreed batches and buckets.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "runtime/negotiation/message.hpp"
#include "telemetry/trace/dump.hpp"
#include "telemetry/trace/reader.hpp"
#include "telemetry/trace/recorder.hpp"
#include "telemetry/trace/replay.hpp"
#include "telemetry/trace/stragglers.hpp"
#include "telemetry/trace/timeline.hpp"

namespace chorus::telemetry::trace {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

tensor_spec spec(std::string name) {
  return tensor_spec{std::move(name), collective_kind::allreduce, dtype::f32, {1024}, reduce_op::sum, -1,
                     device_kind::cpu, 0};
}

/// Two ranks; rank 1 makes "w" ready 30 ms after rank 0 (cycle 2), rank 0 makes "b" ready
/// 20 ms after rank 1 (cycle 3).
class two_rank_recording : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chorus-trace-tools-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto t0 = clock::now();
    for (int r = 0; r < 2; ++r) {
      recorder_options o;
      o.dir = dir_;
      o.rank = r;
      o.size = 2;
      auto rec = *recorder::open(o);
      rec->on_tunables({64u << 20, 4u << 20, 2, 1000us, 1u << 20}, t0);
      rec->on_enqueue(1, spec("w"), t0 + (r == 1 ? 30ms : 0ms));
      rec->on_ready(1, spec("w"), r == 1 ? 2 : 1, t0 + (r == 1 ? 30ms : 0ms));
      rec->on_enqueue(2, spec("b"), t0 + (r == 0 ? 50ms : 30ms));
      rec->on_ready(2, spec("b"), r == 0 ? 3 : 2, t0 + (r == 0 ? 50ms : 30ms));
      negotiation::gossip_message m;
      m.cycle = 2;
      m.from = r;
      m.announced.push_back({spec("w"), {}});
      auto bytes = negotiation::encode(m);
      std::vector<uint8_t> raw(bytes.size());
      std::memcpy(raw.data(), bytes.data(), bytes.size());
      rec->on_gossip_sent(1 - r, raw, t0 + 31ms);
      rec->on_cycle({2, 1, 1, t0 + 30ms, t0 + 31ms});
      std::vector<std::string> w{"w"}, b{"b"};
      std::vector<std::chrono::microseconds> lat{31000us};
      rec->on_agreed(2, w, lat, t0 + 31ms);
      rec->on_bucket({1, 2, 100, 1, 4096, true, "allreduce", w, "ring"}, t0 + 31ms);
      rec->on_chunk_start(0, 100, 4096, t0 + 32ms);
      rec->on_chunk_end(0, 100, 4096, status{}, t0 + 32ms, t0 + 35ms);
      rec->on_callback(1, spec("w"), status{}, t0, t0 + 36ms);
      rec->on_cycle({3, 1, 1, t0 + 50ms, t0 + 51ms});
      rec->on_agreed(3, b, lat, t0 + 51ms);
      rec->on_bucket({2, 3, 101, 1, 4096, true, "allreduce", b, "hier_sharded"}, t0 + 51ms);
    }
    auto files = read_trace_dir(dir_);
    ASSERT_TRUE(files.ok()) << files.error().to_string();
    files_ = std::move(*files);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
  std::vector<trace_file> files_;
};

TEST_F(two_rank_recording, StragglersNameTheLateRankPerTensorAndCycle) {
  auto r = find_stragglers(files_);
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_EQ(r.tensors[0].name, "w");
  EXPECT_EQ(r.tensors[0].last_rank, 1);
  EXPECT_NEAR(static_cast<double>(r.tensors[0].by_ns), 30e6, 2e6);
  EXPECT_EQ(r.tensors[1].name, "b");
  EXPECT_EQ(r.tensors[1].last_rank, 0);
  EXPECT_NEAR(static_cast<double>(r.tensors[1].by_ns), 20e6, 2e6);
  ASSERT_EQ(r.cycles.size(), 2u);
  EXPECT_EQ(r.cycles[0].cycle, 2u);
  EXPECT_EQ(r.cycles[0].last_rank, 1);
  ASSERT_EQ(r.summary.size(), 2u);
  EXPECT_EQ(r.summary[0].rank, 1);  // 30 ms in all beats 20 ms
  EXPECT_EQ(r.summary[0].max_name, "w");
  std::ostringstream os;
  print(r, os);
  EXPECT_NE(os.str().find("stragglers: 2 ranks, 2 operations, 2 cycles"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("'w' cycle 2: rank 1 by "), std::string::npos) << os.str();
}

TEST_F(two_rank_recording, DumpDecodesControlMessages) {
  std::ostringstream os;
  dump(files_[0], os);
  auto text = os.str();
  EXPECT_NE(text.find("\"kind\":\"gossip_sent\",\"to\":1,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"message\":{\"type\":\"gossip\",\"cycle\":2,\"round\":0,\"from\":0,\"ready\":[],\"announced\":[\"w\"]}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"kind\":\"ready\",\"handle\":1,\"name\":\"w\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"kind\":\"end\""), std::string::npos) << text;
}

TEST_F(two_rank_recording, BucketsSayWhichAlgorithmReducedThem) {
  std::vector<std::string> seen;
  for (const auto& r : files_[0].records)
    if (r.kind == record_kind::bucket) seen.push_back(r.algorithm);
  EXPECT_EQ(seen, (std::vector<std::string>{"ring", "hier_sharded"}));
  std::ostringstream os;
  dump(files_[0], os);
  EXPECT_NE(os.str().find("\"algorithm\":\"hier_sharded\""), std::string::npos) << os.str();
}

TEST_F(two_rank_recording, TimelineHasEveryKindOfSpanForEveryRank) {
  std::ostringstream os;
  auto stats = write_timeline(files_, os);
  auto text = os.str();
  EXPECT_GT(stats.events, 10u);
  for (int pid : {0, 1}) {
    auto p = "\"pid\":" + std::to_string(pid);
    for (std::string what : {"\"name\":\"cycle 2\",\"cat\":\"negotiation\",\"ph\":\"X\",",
                             "\"name\":\"bucket 1 (allreduce, 1 tensors)\",\"cat\":\"fusion\",\"ph\":\"X\",",
                             "\"cat\":\"chunk\",\"ph\":\"X\",", "\"name\":\"w\",\"cat\":\"op\",\"ph\":\"b\"",
                             "\"name\":\"w\",\"cat\":\"op\",\"ph\":\"e\""})
      EXPECT_NE(text.find(what), std::string::npos) << what;
    EXPECT_NE(text.find(p), std::string::npos);
  }
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
}

TEST_F(two_rank_recording, ReplayInputCarriesReadyCyclesAndDecisions) {
  auto in = replay_input_from(files_);
  ASSERT_TRUE(in.ok()) << in.error().to_string();
  EXPECT_EQ(in->size, 2);
  EXPECT_EQ(in->cycles, 3u);
  const auto& r1 = in->ranks[1];
  EXPECT_EQ(r1.tuning.in_place_bytes, 1u << 20);
  ASSERT_EQ(r1.ops.size(), 2u);
  EXPECT_EQ(r1.ops[0].cycle, 2u);
  EXPECT_EQ(r1.ops[0].spec.name, "w");
  EXPECT_EQ(r1.recorded.cycles, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(r1.recorded.agreed.at(3), std::vector<std::string>{"b"});
  ASSERT_EQ(r1.recorded.buckets.size(), 2u);
  EXPECT_EQ(r1.recorded.buckets[1].first_sequence, 101u);
  // The recorded decisions compared with themselves (the comparison, not the actors).
  std::vector<rank_decisions> same{in->ranks[0].recorded, in->ranks[1].recorded};
  EXPECT_EQ(compare(*in, same).text(), "replay matches: 3 cycles, 2 tensors");
  same[1].agreed[3].clear();
  EXPECT_EQ(compare(*in, same).text(), "replay differs at cycle 3, rank 1: agreed batch: expected [b], got []");
}

}  // namespace
}  // namespace chorus::telemetry::trace
