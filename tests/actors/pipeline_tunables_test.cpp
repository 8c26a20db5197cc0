// The pipeline's tunables on a real in-process job: set_tunables and start_streams decide the
// streams and chunks of later batches; the autotuner refuses set_tunables, holds (collectively)
// and resumes; a streams axis above the connections is refused. Every wait has a hard bound.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "runtime/collectives/communicator.hpp"
#include "tests/support/pipeline_job.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::testing;

/// The streams and sizes of the chunks started, in order.
struct chunk_observer final : telemetry::observer {
  std::mutex mu;
  std::vector<std::pair<int, std::size_t>> chunks;
  void on_chunk_start(int stream, uint64_t, std::size_t bytes, telemetry::time_point) override {
    std::lock_guard lk(mu);
    chunks.emplace_back(stream, bytes);
  }
  std::vector<std::pair<int, std::size_t>> take() {
    std::lock_guard lk(mu);
    return std::exchange(chunks, {});
  }
};

TEST(pipeline_tunables, start_streams_and_set_tunables_decide_the_streams_and_chunks_of_later_batches) {
  pipeline_options o;
  o.start_streams = 1;
  o.chunk_bytes = 1 << 14;
  o.in_place_bytes = 0;
  std::vector<std::shared_ptr<chunk_observer>> obs{std::make_shared<chunk_observer>(),
                                                   std::make_shared<chunk_observer>()};
  // Off the direct path: its chunks take no stream, and a bucket it takes whole is not cut.
  collective_options streams_only;
  streams_only.caller_bytes = 0;
  auto job = start_job(2, o, [&](int r) { return obs[static_cast<std::size_t>(r)]; }, streams_only);
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  steps_of_ones(job, "first");
  for (auto& [stream, bytes] : obs[0]->take()) {
    EXPECT_EQ(stream, 0);
    EXPECT_LE(bytes, std::size_t{1} << 14);
  }
  // Quiescent on both ranks: both switch before either enqueues again.
  telemetry::tunables t{64u << 20, 1u << 16, 3, std::chrono::microseconds(500), 0};
  for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(t).ok());
  steps_of_ones(job, "second");
  std::set<int> streams;
  for (auto& [stream, bytes] : obs[0]->take()) {
    streams.insert(stream);
    EXPECT_LE(bytes, std::size_t{1} << 16);
  }
  EXPECT_GE(streams.size(), 2u);
  EXPECT_LE(*streams.rbegin(), 2);
  // Values out of range are refused, naming them.
  t.streams = 9;
  auto bad = job[0].pipe->set_tunables(t);
  EXPECT_EQ(bad.code(), errc::invalid_argument);
  EXPECT_NE(bad.message().find("streams=9, expected 1..8"), std::string::npos) << bad.to_string();
  t.streams = 1;
  t.chunk_bytes = 0;
  EXPECT_EQ(job[0].pipe->set_tunables(t).code(), errc::invalid_argument);
  stop_job(job);
}

TEST(pipeline_tunables, set_tunables_is_refused_while_autotuning) {
  pipeline_options o;
  o.autotune.enabled = true;
  auto job = start_job(1, o);
  ASSERT_TRUE(job[0].pipe);
  auto st = job[0].pipe->set_tunables({1u << 20, 1u << 20, 1, std::chrono::microseconds(1000), 1u << 20});
  EXPECT_EQ(st.code(), errc::config) << st.to_string();
  stop_job(job);
}

/// Counts the autotuner's agreed windows and the chunks' streams.
struct autotune_counter final : telemetry::observer {
  std::mutex mu;
  int windows = 0;
  std::set<int> streams;
  void on_autotune(const telemetry::autotune_event&, telemetry::time_point) override {
    std::lock_guard lk(mu);
    ++windows;
  }
  void on_chunk_start(int stream, uint64_t, std::size_t, telemetry::time_point) override {
    std::lock_guard lk(mu);
    streams.insert(stream);
  }
  std::pair<int, std::set<int>> take() {
    std::lock_guard lk(mu);
    return {std::exchange(windows, 0), std::exchange(streams, {})};
  }
};

// `n` training steps of one tensor that keeps its name, as a model's gradients do: the
// autotuner's windows count steps by the names that come round (runtime/tuning/window_meter.hpp).
void training_steps(std::vector<rank_job>& job, int n) {
  for (int k = 0; k < n; ++k) steps_of_ones(job, "grad");
}

TEST(pipeline_tunables, a_held_autotuner_scores_nothing_and_a_restart_searches_from_the_tunables_set) {
  pipeline_options o;
  o.autotune.enabled = true;
  o.autotune_held = true;
  o.autotune.steps_per_sample = 1;
  o.autotune.windows_per_sample = 1;
  o.chunk_bytes = 1 << 16;
  o.in_place_bytes = 0;
  std::vector<std::shared_ptr<autotune_counter>> obs{std::make_shared<autotune_counter>(),
                                                     std::make_shared<autotune_counter>()};
  auto job = start_job(2, o, [&](int r) { return obs[static_cast<std::size_t>(r)]; });
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  // Held: set_tunables drives the pipeline, no window is scored.
  telemetry::tunables one{1u << 20, 1u << 16, 1, std::chrono::microseconds(1000), 0};
  for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(one).ok());
  steps_of_ones(job, "held", 6);
  for (auto& ob : obs) {
    auto [windows, streams] = ob->take();
    EXPECT_EQ(windows, 0);
    EXPECT_EQ(streams, (std::set<int>{0}));
  }
  // Resumed with a restart: windows are scored and agreed on both ranks, results stay exact.
  for (auto& j : job) ASSERT_TRUE(j.pipe->resume_autotune(true).ok());
  training_steps(job, 12);
  // Autotuning: set_tunables is refused. Held again (collective: every rank pads to the most
  // windows any rank submitted, and waits until they are agreed), both ranks have handled the
  // same windows, and set_tunables works.
  EXPECT_EQ(job[0].pipe->set_tunables(one).code(), errc::config);
  const auto hold = [](pipeline& p) { return p.hold_autotune(); };
  ASSERT_EQ(on_every_rank(job, hold), "");
  std::vector<int> windows;
  for (auto& ob : obs) windows.push_back(ob->take().first);
  EXPECT_GT(windows[0], 0);
  EXPECT_EQ(windows[0], windows[1]);
  for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(one).ok());
  steps_of_ones(job, "held again", 4);
  for (auto& ob : obs) {
    auto [w, streams] = ob->take();
    EXPECT_EQ(w, 0);
    EXPECT_EQ(streams, (std::set<int>{0}));
  }
  // Hold right after tuned steps, again and again: ranks cut their windows where agreements
  // happen to arrive, so their counts differ at a hold; the padding makes every rank handle the
  // same windows and the tuners stay alike (a divergence stops the job with "ranks computed
  // different proposals").
  for (int round = 0; round < 6; ++round) {
    for (auto& j : job) ASSERT_TRUE(j.pipe->resume_autotune(false).ok());
    training_steps(job, 3);
    ASSERT_EQ(on_every_rank(job, hold), "") << round;
    for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(one).ok());
    steps_of_ones(job, "fixed" + std::to_string(round) + "-", 1);
  }
  for (auto& j : job) ASSERT_TRUE(j.pipe->resume_autotune(false).ok());
  steps_of_ones(job, "last", 3);
  stop_job(job);
}

TEST(pipeline_tunables, hold_and_resume_need_the_autotuner) {
  auto job = start_job(1);
  ASSERT_TRUE(job[0].pipe);
  EXPECT_EQ(job[0].pipe->hold_autotune().code(), errc::config);
  EXPECT_EQ(job[0].pipe->resume_autotune(true).code(), errc::config);
  stop_job(job);
}

TEST(pipeline_tunables, an_autotune_streams_axis_above_the_connections_is_refused_naming_both) {
  process_env env;
  env.source = "chorus";
  auto joined = communicator::connect(env, mesh::mesh_options{}, collective_options{});
  ASSERT_TRUE(joined.ok()) << joined.error().to_string();
  pipeline_options o;
  o.autotune.enabled = true;
  o.autotune.max_streams = 9;
  auto pipe = pipeline::start(*joined->comm, joined->control, o);
  ASSERT_FALSE(pipe.ok());
  EXPECT_EQ(pipe.error().code(), errc::config);
  EXPECT_NE(pipe.error().message().find("CHORUS_MAX_STREAMS=9 but only CHORUS_NUM_STREAMS=8"), std::string::npos)
      << pipe.error().to_string();
  joined->comm->close();
}

}  // namespace
}  // namespace chorus
