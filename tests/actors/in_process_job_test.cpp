// The in-process job: N real negotiators (and fusion actors) in one actor system over the
// in-process transport. Every rank must agree the same batches for N = 1..17 with tensors
// enqueued in different orders; gossip handles exactly 2*ceil(log2 N) messages per rank and
// cycle; the modelled link latency shows in the cycle time; mismatches, one-sided tensors
// (timeout) and stop end ops with errors; fusion plans are recorded and equal on every rank.
// Real time (bounded waits, no sleeps); randomised orders print their seed.
#include "actors/in_process_job.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

tensor_spec spec(std::string name, std::vector<int64_t> shape = {4}) {
  return tensor_spec{std::move(name), collective_kind::allreduce, dtype::f32, std::move(shape), reduce_op::sum, -1,
                     device_kind::cpu, 0};
}

in_process_job_options options(int n, std::string strategy) {
  in_process_job_options o;
  o.ranks = n;
  o.strategy = std::move(strategy);
  o.negotiation.cycle_time = 0ms;
  o.negotiation.stall_warning_time = 0s;
  return o;
}

std::set<std::string> agreed_names(const in_process_job& job, int rank) {
  std::set<std::string> out;
  for (auto& b : job.batches(rank)) out.insert(b.names.begin(), b.names.end());
  return out;
}

class in_process_job_ranks : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(in_process_job_ranks, every_rank_agrees_the_same_batches) {
  auto [n, strategy] = GetParam();
  auto seed = testing::seed_for("in_process_job_test", static_cast<uint64_t>(n) * 2 + (strategy == "gossip"));
  std::mt19937_64 rng(seed);
  auto job = in_process_job::start(options(n, strategy));
  ASSERT_TRUE(job) << job.error().to_string();
  constexpr int tensors = 12;
  for (int r = 0; r < n; ++r) {
    std::vector<int> order(tensors);
    for (int i = 0; i < tensors; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) (*job)->enqueue(r, spec("t" + std::to_string(i)));
  }
  auto st = (*job)->wait(20s);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ((*job)->divergence(), "");
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed_names(**job, r).size(), std::size_t{tensors}) << "rank " << r;
    EXPECT_TRUE((*job)->failures(r).empty()) << "rank " << r;
  }
  if (strategy == "gossip" && n > 1) {
    uint32_t want = 2 * static_cast<uint32_t>(negotiation::gossip_rounds(n));
    for (int r = 0; r < n; ++r) {
      auto cycles = (*job)->cycles(r);
      ASSERT_FALSE(cycles.empty());
      for (auto& c : cycles) EXPECT_EQ(c.messages_sent + c.messages_received, want) << "rank " << r;
      auto m = (*job)->messages(r);
      EXPECT_EQ(m.sent + m.received, want * cycles.size()) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(sizes, in_process_job_ranks,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5, 8, 17),
                                            ::testing::Values(std::string("gossip"), std::string("central"))));

TEST(in_process_job, link_latency_bounds_the_cycle_from_below) {
  auto o = options(4, "gossip");  // 2 rounds
  o.link_latency = 2000us;
  auto job = in_process_job::start(o);
  ASSERT_TRUE(job) << job.error().to_string();
  for (int r = 0; r < 4; ++r) (*job)->enqueue(r, spec("x"));
  auto st = (*job)->wait(10s);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // A rank may join late (when a peer's gossip reaches it), so only the job's cycle is bounded:
  // the last round-1 message leaves after a round-0 message arrived, 2 links after the start.
  auto first = std::chrono::steady_clock::time_point::max();
  auto last = std::chrono::steady_clock::time_point::min();
  for (int r = 0; r < 4; ++r) {
    auto cycles = (*job)->cycles(r);
    ASSERT_FALSE(cycles.empty()) << "rank " << r;
    first = std::min(first, cycles.front().started);
    last = std::max(last, cycles.back().finished);
  }
  EXPECT_GE(last - first, 4000us) << "two rounds of 2 ms links";
}

TEST(in_process_job, mismatched_shapes_end_the_op_with_the_same_error_everywhere) {
  auto job = in_process_job::start(options(3, "gossip"));
  ASSERT_TRUE(job) << job.error().to_string();
  (*job)->enqueue(0, spec("w", {2, 3}));
  (*job)->enqueue(1, spec("w", {2, 3}));
  (*job)->enqueue(2, spec("w", {2, 4}));
  auto st = (*job)->wait(10s);
  EXPECT_EQ(st.code(), errc::mismatch) << st.to_string();
  std::string text;
  for (int r = 0; r < 3; ++r) {
    auto f = (*job)->failures(r);
    ASSERT_EQ(f.size(), 1u) << "rank " << r;
    EXPECT_EQ(f[0].name, "w");
    EXPECT_EQ(f[0].error.code(), errc::mismatch);
    if (r == 0) text = f[0].error.message();
    EXPECT_EQ(f[0].error.message(), text) << "rank " << r;
  }
  EXPECT_NE(text.find("shape"), std::string::npos) << text;
}

TEST(in_process_job, a_tensor_on_some_ranks_times_out_and_stop_ends_it) {
  auto job = in_process_job::start(options(3, "gossip"));
  ASSERT_TRUE(job) << job.error().to_string();
  (*job)->enqueue(0, spec("only_here"));
  (*job)->enqueue(1, spec("only_here"));
  auto st = (*job)->wait(200ms);
  EXPECT_EQ(st.code(), errc::timeout) << st.to_string();
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("rank 2"), std::string::npos) << st.message();
  (*job)->stop();
  for (int r = 0; r < 2; ++r) {
    auto f = (*job)->failures(r);
    ASSERT_EQ(f.size(), 1u) << "rank " << r;
    EXPECT_EQ(f[0].error.code(), errc::shutdown);
  }
  (*job)->stop();  // idempotent
}

TEST(in_process_job, fusion_plans_are_recorded_and_equal_on_every_rank) {
  auto o = options(4, "gossip");
  o.fusion = true;
  o.fusion_threshold = 1024;  // 256 floats per bucket
  o.chunk_bytes = 512;
  o.start_window = 2;         // chunks beyond the window wait for chunk_ended from the capture
  auto job = in_process_job::start(o);
  ASSERT_TRUE(job) << job.error().to_string();
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 6; ++i) (*job)->enqueue(r, spec("g" + std::to_string(i), {100}));
  auto st = (*job)->wait(10s);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // Buckets are planned per batch; wait until every rank's fusion planned all six tensors.
  auto planned = [&](int r) {
    std::size_t k = 0;
    for (auto& b : (*job)->buckets(r)) k += b.names.size();
    return k;
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  for (int r = 0; r < 4; ++r)
    while (planned(r) < 6 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  auto ref = (*job)->buckets(0);
  ASSERT_FALSE(ref.empty());
  std::size_t members = 0;
  for (auto& b : ref) {
    EXPECT_LE(b.bytes, 1024u);
    members += b.names.size();
  }
  EXPECT_EQ(members, 6u);
  for (int r = 1; r < 4; ++r) {
    auto mine = (*job)->buckets(r);
    ASSERT_EQ(mine.size(), ref.size()) << "rank " << r;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(mine[i].names, ref[i].names) << "rank " << r << " bucket " << i;
      EXPECT_EQ(mine[i].first_sequence, ref[i].first_sequence) << "rank " << r << " bucket " << i;
      EXPECT_EQ(mine[i].chunks, ref[i].chunks) << "rank " << r << " bucket " << i;
    }
  }
}

TEST(in_process_job, a_user_observer_sees_each_ranks_cycles) {
  struct counting : telemetry::observer {
    std::atomic<int> cycles{0};
    void on_cycle(const telemetry::cycle_event&) override { ++cycles; }
  };
  std::vector<std::shared_ptr<counting>> seen;
  for (int r = 0; r < 3; ++r) seen.push_back(std::make_shared<counting>());
  auto o = options(3, "central");
  o.observer = [&](int rank) { return seen[static_cast<std::size_t>(rank)]; };
  auto job = in_process_job::start(o);
  ASSERT_TRUE(job) << job.error().to_string();
  for (int r = 0; r < 3; ++r) (*job)->enqueue(r, spec("a"));
  ASSERT_TRUE((*job)->wait(10s).ok());
  for (int r = 0; r < 3; ++r) {
    EXPECT_GE(seen[r]->cycles.load(), 1) << "rank " << r;
    EXPECT_EQ(static_cast<std::size_t>(seen[r]->cycles.load()), (*job)->cycles(r).size()) << "rank " << r;
  }
}

TEST(in_process_job, bad_options_are_config_errors) {
  auto o = options(0, "gossip");
  auto job = in_process_job::start(o);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code(), errc::config);
  o = options(2, "ring");
  job = in_process_job::start(o);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code(), errc::config);
}

}  // namespace
}  // namespace chorus
