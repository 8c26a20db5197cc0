// A fusion buffer's worth of bytes starts a negotiation cycle without waiting out the cycle
// time (negotiation_options::start_bytes, docs/design.md section 3), on a real in-process job
// of two ranks: the pipeline sets it from CHORUS_FUSION_THRESHOLD and follows the fusion
// threshold a tunables switch sets. Every wait has a hard bound.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/pipeline_job.hpp"
#include "tests/support/test_time.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::testing;
using clock_type = std::chrono::steady_clock;

TEST(pipeline_full_bucket, a_fusion_thresholds_worth_is_agreed_at_once_and_half_of_one_waits_out_the_cycle_time) {
  const auto cycle = std::chrono::duration_cast<std::chrono::microseconds>(scaled(3000ms));
  pipeline_options o;
  o.fusion_threshold = 1u << 20;  // steps_of_ones' tensor is 1 MiB: a full bucket
  o.cycle_time = cycle;
  auto job = start_job(2, o);
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  steps_of_ones(job, "bucket.first");  // an idle job starts its first cycle at once
  // The next cycle may start a cycle time after that one, but the tensor fills a bucket: it
  // goes now.
  auto t0 = clock_type::now();
  steps_of_ones(job, "bucket.full");
  const auto full = clock_type::now() - t0;
  EXPECT_LT(full, cycle / 2) << "a full bucket waited " << std::chrono::duration<double>(full).count() << " s";
  // Twice the threshold (switched as the autotuner does): the same tensor is half a bucket. It
  // waits out the cycle time from the cycle that agreed "bucket.full", which began after t0 on
  // every rank, so it cannot end before t0 + cycle time however loaded the machine is.
  telemetry::tunables t{2u << 20, o.chunk_bytes, 1, cycle, o.in_place_bytes};
  ASSERT_EQ(on_every_rank(job, [&](pipeline& p) { return p.set_tunables(t); }), "");
  steps_of_ones(job, "bucket.half");
  const auto half = clock_type::now() - t0;
  EXPECT_GE(half, cycle - 50ms) << "half a bucket ended only " << std::chrono::duration<double>(half).count()
                                << " s after the full one began";
  stop_job(job);
}

}  // namespace
}  // namespace chorus
