// The pipeline's direct path end to end on a real in-process job of two ranks on one host
// (docs/design.md, "The pipeline's direct path"): tensors of odd sizes, so their fused bucket
// has alignment gaps, in place on one rank and out of place on the other, and one past
// CHORUS_IN_PLACE_BYTES, go as one direct bucket of one chunk, never packed, and every rank
// ends with the exact sums (outputs) and its inputs untouched. Every wait has a hard bound.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "runtime/collectives/communicator.hpp"
#include "tests/support/pipeline_job.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::testing;

struct bucket_observer final : telemetry::observer {
  std::mutex mu;
  std::vector<telemetry::bucket_event> buckets;
  void on_bucket(const telemetry::bucket_event& b, telemetry::time_point) override {
    std::lock_guard lk(mu);
    buckets.push_back(b);
  }
};

// Element i of tensor k on rank r: small integers, exact in f32.
float value(int r, std::size_t k, std::size_t i) { return static_cast<float>(r + 2 * k + i % 3); }

TEST(pipeline_direct, odd_sizes_in_and_out_of_place_fuse_into_one_direct_chunk_with_exact_sums) {
  std::vector<std::shared_ptr<bucket_observer>> obs{std::make_shared<bucket_observer>(),
                                                    std::make_shared<bucket_observer>()};
  pipeline_options o;
  o.in_place_bytes = 1u << 20;
  o.chunk_bytes = 1u << 16;
  // A long cycle time, after a first cycle (below): the next one starts only once every rank
  // holds all four tensors, so they are agreed, and planned, together even on a loaded machine.
  o.cycle_time = 300ms;
  auto job = start_job(2, o, [&](int r) { return obs[static_cast<std::size_t>(r)]; });
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  if (!job[0].comm->pipeline_lane()) GTEST_SKIP() << "no shared-memory lane here (the direct path needs one)";
  steps_of_ones(job, "direct.first");
  // 3, 5 and 7 floats (gaps at 64-byte alignment) and one of 1.2 MB (past in_place_bytes,
  // and past chunk_bytes: the lane takes the bucket whole).
  const std::vector<std::size_t> sizes{3, 5, 7, 300001};
  std::vector<std::vector<std::vector<float>>> in(2), out(2);
  std::vector<std::vector<waiter>> waiters(2);
  for (int r = 0; r < 2; ++r) {
    waiters[r] = std::vector<waiter>(sizes.size());
    std::vector<op_request> ops;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      in[r].emplace_back(sizes[k]);
      for (std::size_t i = 0; i < sizes[k]; ++i) in[r][k][i] = value(r, k, i);
      // Rank 1's tensors 1 and 3 out of place; everything else in place.
      const bool out_of_place = r == 1 && k % 2 == 1;
      out[r].emplace_back(out_of_place ? std::vector<float>(sizes[k], -1.0f) : std::vector<float>{});
      float* output = out_of_place ? out[r][k].data() : in[r][k].data();
      ops.push_back({make("direct.t" + std::to_string(k), collective_kind::allreduce, dtype::f32,
                          {static_cast<int64_t>(sizes[k])}),
                     in[r][k].data(), output, waiters[r][k].callback()});
    }
    job[r].pipe->enqueue_all(std::move(ops));
  }
  for (int r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      ASSERT_TRUE(waiters[r][k].wait()) << "rank " << r << " tensor " << k << " never ended";
      ASSERT_TRUE(waiters[r][k].result.ok()) << waiters[r][k].result.to_string();
    }
  for (int r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const bool out_of_place = r == 1 && k % 2 == 1;
      const auto& result = out_of_place ? out[r][k] : in[r][k];
      for (std::size_t i = 0; i < sizes[k]; ++i)
        ASSERT_EQ(result[i], value(0, k, i) + value(1, k, i)) << "rank " << r << " tensor " << k << " element " << i;
      if (out_of_place)
        for (std::size_t i = 0; i < sizes[k]; ++i) ASSERT_EQ(in[r][k][i], value(r, k, i)) << "input changed";
    }
  // Every rank planned the four tensors as one fused direct bucket of one chunk (the first
  // cycle's tensor is a bucket of its own).
  for (int r = 0; r < 2; ++r) {
    std::lock_guard lk(obs[r]->mu);
    std::size_t fused = 0;
    for (const auto& b : obs[r]->buckets)
      if (b.tensors.size() == sizes.size()) {
        ++fused;
        EXPECT_EQ(b.algorithm, "direct");
        EXPECT_EQ(b.chunks, 1u);
        EXPECT_FALSE(b.in_place);
      }
    EXPECT_EQ(fused, 1u) << "rank " << r << ": " << obs[r]->buckets.size() << " buckets";
  }
  stop_job(job);
}

}  // namespace
}  // namespace chorus
