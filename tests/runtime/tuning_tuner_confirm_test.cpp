// The autotuner's confirmation (runtime/tuning/tuner.hpp) on a modelled job: before settling,
// a search samples its best points again (so a lucky sample does not decide), the point of its
// best single sample too, and the chunk sizes next to its best point, in the first search and
// in a search started by a drop (the rest of its sequencing: tuning_tuner_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "runtime/tuning/knobs.hpp"
#include "runtime/tuning/tuner.hpp"
#include "tests/support/tuner_model.hpp"

namespace chorus::tuning {
namespace {

using chorus::testing::converge;
using chorus::testing::far_peak;
using chorus::testing::model;
using chorus::testing::poor_start;
using chorus::testing::small_search;

TEST(TuningTuner, BestPointsAreSampledAgainSoALuckySampleDoesNotDecide) {
  auto s = knob_space(8).value();
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  tuner_options o;
  o.search.seed = 7;
  o.search.max_samples = 16;
  o.search.noise = 0.02;
  o.settle_windows = 0;
  o.windows_per_sample = 1;
  o.confirm_points = 2;
  tuner t(s, o, to_point(s, poor_start()));
  // A point's first window is lucky by up to 1.6x (a noisy window); later ones are true.
  std::map<point, int> visits;
  std::vector<point> sampled;
  int samples_at_convergence = -1;
  for (int w = 0; w < 200 && samples_at_convergence < 0; ++w) {
    const point at = t.current();
    const int seen = visits[at]++;
    const double luck = seen ? 1.0 : 1.0 + 0.6 * double(mix64(uint64_t(w) * 977) % 1000) / 1000.0;
    auto step = t.on_window(model(s, at, peak) * luck);
    if (step.sample) sampled.push_back(step.sample->at);
    if (step.converged) samples_at_convergence = static_cast<int>(t.samples());
  }
  ASSERT_GT(samples_at_convergence, 0);
  EXPECT_LE(samples_at_convergence, o.search.max_samples);
  // The search's last samples were second samples of points it had sampled before.
  ASSERT_GE(sampled.size(), 3u);
  for (std::size_t k = sampled.size() - 2; k < sampled.size(); ++k)
    EXPECT_GE(std::count(sampled.begin(), sampled.end(), sampled[k]), 2) << s.describe(sampled[k]);
  // The point it settled on was measured at least twice.
  EXPECT_GE(std::count(sampled.begin(), sampled.end(), t.current()), 2) << s.describe(t.current());
}

TEST(TuningTuner, ThePointOfTheBestSingleSampleIsSampledAgainBeforeSettling) {
  // A narrow real peak that the fit ranks below its broad neighbours, or a lucky window: only
  // a second sample tells them apart, so the best single sample's point is sampled again too.
  auto s = knob_space(8).value();
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  int outside_fit = 0;  // seeds whose best single sample the fit did not rank among its best two
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    for (bool raw_best : {false, true}) {
      tuner_options o;
      o.search.seed = seed;
      o.search.max_samples = 16;
      o.search.noise = 0.1;  // (the default)
      o.settle_windows = 0;
      o.windows_per_sample = 1;
      o.confirm_points = 2;
      o.confirm_raw_best = raw_best;
      tuner t(s, o, to_point(s, poor_start()));
      std::map<point, int> visits;
      std::vector<observation> first_search;
      for (int w = 0; w < 200 && t.phase() != tuner_phase::watching; ++w) {
        const point at = t.current();
        const double luck = visits[at]++ ? 1.0 : 1.0 + 0.2 * double(mix64(seed * 7919 + uint64_t(w)) % 1000) / 1000.0;
        auto step = t.on_window(model(s, at, peak) * luck);
        if (step.sample) first_search.push_back({step.sample->at, step.sample->score});
      }
      ASSERT_EQ(t.phase(), tuner_phase::watching) << "seed " << seed;
      EXPECT_LE(t.samples(), static_cast<uint64_t>(o.search.max_samples)) << "seed " << seed;
      auto raw = std::max_element(first_search.begin(), first_search.end(),
                                  [](const observation& a, const observation& b) { return a.score < b.score; });
      const auto times = std::count_if(first_search.begin(), first_search.end(),
                                       [&](const observation& ob) { return ob.at == raw->at; });
      if (raw_best) {
        EXPECT_GE(times, 2) << "seed " << seed << ": " << s.describe(raw->at) << " was sampled once";
      } else {
        outside_fit += times < 2;
      }
    }
  }
  // Without it, some seeds settle without a second look at their best single sample (4 of
  // these 12 when written).
  EXPECT_GT(outside_fit, 0);
}

/// The samples at n-4 and n-3 (just before a confirmation of two samples) are the chunk sizes
/// one step below and one step above a point sampled before them, the other knobs alike.
void expect_chunk_probes_before_confirming(const search_space& s, const std::vector<point>& sampled, uint64_t seed) {
  const std::size_t n = sampled.size();
  ASSERT_GE(n, 5u) << "seed " << seed;
  const point low = sampled[n - 4], high = sampled[n - 3];
  bool pair = low[1] + 2 == high[1];
  for (std::size_t d = 0; d < low.size(); ++d)
    if (d != 1) pair = pair && low[d] == high[d];
  EXPECT_TRUE(pair) << "seed " << seed << ": " << s.describe(low) << " then " << s.describe(high)
                    << " are not the chunk neighbours of one point";
  point centre = low;
  centre[1] += 1;
  const auto before = sampled.begin() + static_cast<std::ptrdiff_t>(n - 4);
  EXPECT_NE(std::find(sampled.begin(), before, centre), before)
      << "seed " << seed << ": the centre " << s.describe(centre) << " was not sampled before";
}

TEST(TuningTuner, TheFirstSearchSamplesTheChunkSizesNextToItsBestBeforeConfirming) {
  auto s = knob_space(8).value();
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  for (uint64_t seed : {3u, 7u, 11u}) {
    tuner_options o;
    o.search.seed = seed;
    o.search.max_samples = 16;
    o.settle_windows = 0;
    o.windows_per_sample = 1;
    o.confirm_points = 2;
    o.confirm_chunk_steps = 1;
    o.confirm_raw_best = false;  // (the confirmation is the two best points only)
    tuner t(s, o, to_point(s, poor_start()));
    std::vector<point> sampled;
    ASSERT_TRUE(converge(t, s, peak, 200)) << "seed " << seed;
    for (const auto& ob : t.optimizer().history()) sampled.push_back(ob.at);
    EXPECT_LE(t.samples(), static_cast<uint64_t>(o.search.max_samples)) << "seed " << seed;
    // Before the two confirmation samples (the peak's chunk size is mid-axis).
    expect_chunk_probes_before_confirming(s, sampled, seed);
  }
}

TEST(TuningTuner, AReSearchSamplesTheChunkSizesNextToItsBestBeforeConfirming) {
  // A search started by a drop samples the chunk sizes next to the point in force; the point it
  // finds may lie elsewhere, so it samples that point's chunk neighbours before confirming too.
  auto s = knob_space(8).value();
  const std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  for (uint64_t seed : {3u, 7u, 11u}) {
    tuner_options o = small_search(seed, 1);
    o.confirm_points = 2;
    o.confirm_chunk_steps = 1;
    o.restart_on_drift = false;  // (no drift check: the confirmation is the two best points only)
    o.confirm_raw_best = false;
    tuner t(s, o, to_point(s, poor_start()));
    ASSERT_TRUE(converge(t, s, peak, 200)) << "seed " << seed;
    t.on_window(model(s, t.current(), peak));  // the converged level
    bool again = false;
    for (int w = 0; w < o.drop_windows; ++w) again = t.on_window(1.0).searching_again || again;
    ASSERT_TRUE(again) << "seed " << seed;
    // The network changed: the peak moved (far_peak), everything is slower.
    for (int w = 0; w < 200 && t.phase() != tuner_phase::watching; ++w)
      t.on_window(0.5 * model(s, t.current(), far_peak));
    ASSERT_EQ(t.phase(), tuner_phase::watching) << "seed " << seed;
    ASSERT_EQ(t.searches(), 1u);
    std::vector<point> sampled;  // the re-search's samples (its optimizer's history)
    for (const auto& ob : t.optimizer().history()) sampled.push_back(ob.at);
    const std::size_t n = sampled.size();
    ASSERT_GE(n, 5u) << "seed " << seed;
    EXPECT_LE(n, static_cast<std::size_t>(o.retune_samples + 2 * o.confirm_chunk_steps + o.confirm_points))
        << "seed " << seed;
    expect_chunk_probes_before_confirming(s, sampled, seed);
    // The last two samples are second samples (the confirmation).
    for (std::size_t k = n - 2; k < n; ++k)
      EXPECT_NE(std::find(sampled.begin(), sampled.begin() + static_cast<std::ptrdiff_t>(k), sampled[k]),
                sampled.begin() + static_cast<std::ptrdiff_t>(k))
          << "seed " << seed << ": " << s.describe(sampled[k]) << " was not sampled before";
  }
}

}  // namespace
}  // namespace chorus::tuning
