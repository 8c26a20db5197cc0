// The autotuner's sequencing (runtime/tuning/tuner.hpp) on a modelled job: from a poor start
// it converges near the best configuration within the sample budget, searches again when the
// "network" changes (trying the stream counts and chunk sizes next to the converged ones, its
// cycle time and in-place threshold held), searches once more
// when the network changes during that search, and tuners fed the same scores agree (same
// switches, same digests). How a search samples its best points again before settling:
// tuning_tuner_confirm_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

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

double best_of(const search_space& s, const std::vector<double>& peak) {
  double best = 0;
  point p(s.dims(), 0);
  for (uint64_t i = 0; i < s.size(); ++i) {
    best = std::max(best, model(s, p, peak));
    for (std::size_t d = 0; d < p.size(); ++d) {
      if (++p[d] < static_cast<int>(s.axes()[d].values.size())) break;
      p[d] = 0;
    }
  }
  return best;
}

TEST(TuningTuner, KnobsRoundTripAndCsv) {
  auto s = knob_space(8).value();
  auto v = poor_start();
  EXPECT_EQ(from_point(s, to_point(s, v)), v);
  EXPECT_EQ(s.axes()[0].values.size(), 8u);
  EXPECT_FALSE(knob_space(0).ok());
  sample_record r{3, to_point(s, v), 1.5e9, tuner_phase::searching, 0};
  EXPECT_EQ(csv_row(r, v, 42), "3,0,search,42,1,262144,1048576,1,1048576,1.5e+09");
  EXPECT_EQ(csv_header().substr(0, 6), "sample");
}

TEST(TuningTuner, SampleIsMedianOfWindowsAfterSettling) {
  auto s = knob_space(8).value();
  tuner_options o;
  o.windows_per_sample = 3;
  o.settle_windows = 1;
  tuner t(s, o, to_point(s, poor_start()));
  // No settling before the first sample (nothing switched yet): windows 5, 1, 3 -> median 3.
  EXPECT_FALSE(t.on_window(5).sample);
  EXPECT_FALSE(t.on_window(1).sample);
  auto step = t.on_window(3);
  ASSERT_TRUE(step.sample);
  EXPECT_EQ(step.sample->score, 3);
  ASSERT_TRUE(step.switch_to);  // a warm-up point
  // After the switch the first window is dropped.
  EXPECT_FALSE(t.on_window(100).sample);
  EXPECT_FALSE(t.on_window(7).sample);
  EXPECT_FALSE(t.on_window(8).sample);
  EXPECT_EQ(t.on_window(9).sample->score, 8);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

/// One tuner's life on the model: converge from the poor start, watch, then the network changes.
struct life {
  int samples_at_convergence = -1;
  double converged = 0, best = 0;  // the model at the converged point; the model's best
  bool retuned = false;            // the drop was noticed and a new search converged
  uint64_t retune_samples = 0;
  uint32_t searches_after = 0;  // searches started after the convergence
  double stale = 0, retuned_at = 0, new_best = 0;  // after the change: staying, the retuned point, the best
};

/// How the network changes after the tuner converged.
enum class change {
  at_once,         // while it watches
  mid_re_search,   // a slump (6 windows at 70%) starts a search first; the change comes 2 samples into it
};

life live(const search_space& s, const tuner_options& o, uint64_t noise_seed, change how = change::at_once,
          const std::vector<double>& moved = far_peak) {
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  tuner t(s, o, to_point(s, poor_start()));
  std::mt19937_64 rng(noise_seed);  // measurement noise, about +-2%
  std::uniform_real_distribution<double> jitter(0.98, 1.02);
  life out;
  for (int windows = 0; windows < 400 && out.samples_at_convergence < 0; ++windows)
    if (t.on_window(model(s, t.current(), peak) * jitter(rng)).converged)
      out.samples_at_convergence = static_cast<int>(t.samples());
  out.converged = model(s, t.current(), peak);
  out.best = best_of(s, peak);
  // Watching: the converged level is measured, steady scores start nothing.
  for (int i = 0; i < 10; ++i)
    if (t.on_window(model(s, t.current(), peak) * jitter(rng)).searching_again) return out;
  // The network changes: the peak moves to `moved`, and everything is slower.
  auto scaled = [&](const point& p) { return 0.5 * model(s, p, moved); };
  const uint64_t samples_before = t.samples();
  const uint32_t searches_before = t.searches();
  if (how == change::mid_re_search) {
    for (int w = 0; w < 6; ++w) t.on_window(0.7 * model(s, t.current(), peak) * jitter(rng));
    const uint64_t spiked = t.samples();
    for (int w = 0; w < 100 && t.samples() < spiked + 2; ++w) t.on_window(model(s, t.current(), peak) * jitter(rng));
  }
  out.stale = scaled(t.current());
  bool again = t.searches() > searches_before;
  for (int after = 0; after < 200 && !out.retuned; ++after) {
    auto step = t.on_window(scaled(t.current()) * jitter(rng));
    again = again || step.searching_again;
    out.retuned = again && step.converged;
  }
  out.retune_samples = t.samples() - samples_before;
  out.searches_after = t.searches() - searches_before;
  out.retuned_at = scaled(t.current());
  out.new_best = 0.5 * best_of(s, moved);
  return out;
}

TEST(TuningTuner, ConvergesFromPoorStartAndRetunesAfterChange) {
  auto s = knob_space(8).value();
  tuner_options o;
  o.search.max_samples = 30;  // the search's budget: 30 samples in all, the confirmation's included
  o.search.noise = 0.02;
  // A search is a random walk through noisy samples: judge it over seeds. Over seeds 100-159
  // the first search reaches >= 95% of the best in 60 (mean 0.991) with the warm-up's Latin
  // hypercube, in 53 (mean 0.967) with pseudo-random warm-up points. Over 40 seeds this
  // model gave, before the hypercube: first search >= 95% of the best in 35; re-search better than staying in 40,
  // both 1.2x staying and >= 75% of the new best in 40, mean 0.978 of it (39 and 0.974 with
  // cycle time and in-place threshold free in the re-search; 0.970 before it sampled its best
  // point's chunk neighbours).
  // With only the stream counts next to the converged one and three best known points among
  // the re-search's starts, and 8 samples: 34, 4 and 0.853.
  int near_best = 0, good_retunes = 0;
  double retuned = 0;  // sum over seeds of retuned / new best
  const int seeds = 8;
  for (int seed = 20; seed < 20 + seeds; ++seed) {
    o.search.seed = static_cast<uint64_t>(seed);
    auto l = live(s, o, static_cast<uint64_t>(seed) * 31 + 5);
    ASSERT_GT(l.samples_at_convergence, 0) << "seed " << seed << ": no convergence in 400 windows";
    EXPECT_LE(l.samples_at_convergence, 30) << "seed " << seed;
    EXPECT_GT(l.converged, 0.9 * l.best) << "seed " << seed;
    near_best += l.converged >= 0.95 * l.best;
    ASSERT_TRUE(l.retuned) << "seed " << seed << ": the drop was not noticed, or the new search did not converge";
    // One search: a steady level after the change is never taken for a second change.
    EXPECT_EQ(l.searches_after, 1u) << "seed " << seed;
    // The budget, the chunk neighbours of its best point, the confirmations and the search's
    // first point sampled again (the drift check).
    EXPECT_LE(l.retune_samples,
              static_cast<uint64_t>(o.retune_samples + 2 * o.confirm_chunk_steps + o.confirm_points + o.confirm_raw_best) + 1)
        << "seed " << seed;
    // Never worse than staying; mostly well above it (the peak moved a long way on two axes;
    // the 5% target is the benchmark's to show).
    EXPECT_GE(l.retuned_at, l.stale) << "seed " << seed;
    good_retunes += l.retuned_at > 1.2 * l.stale && l.retuned_at > 0.75 * l.new_best;
    retuned += l.retuned_at / l.new_best;
  }
  EXPECT_GE(near_best, seeds - 2);
  EXPECT_GE(good_retunes, seeds - 2);
  EXPECT_GE(retuned / seeds, 0.92);
}

TEST(TuningTuner, ReSearchSamplesTheStreamCountsAndChunkSizesNextToTheConvergedOnes) {
  auto s = knob_space(8).value();
  tuner_options o = small_search(5, 1);
  tuner t(s, o, to_point(s, poor_start()));
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  ASSERT_TRUE(converge(t, s, peak, 100));
  t.on_window(model(s, t.current(), peak));  // the converged level
  const point converged = t.current();
  for (std::size_t axis : {0u, 1u}) {
    ASSERT_GT(converged[axis], 0) << s.describe(converged);
    ASSERT_LT(converged[axis], static_cast<int>(s.axes()[axis].values.size()) - 1) << s.describe(converged);
  }
  bool again = false;
  for (int w = 0; w < o.drop_windows; ++w) again = t.on_window(1.0).searching_again || again;
  ASSERT_TRUE(again);
  // The new search's warm-up: the point in force, the best other known point, then one stream
  // more and one fewer, then a chunk size twice and half as large, the other knobs kept.
  std::vector<point> sampled;
  for (int w = 0; w < 10; ++w) {
    const point at = t.current();
    if (t.on_window(1.0).sample) sampled.push_back(at);
  }
  ASSERT_GE(sampled.size(), 6u);
  EXPECT_EQ(sampled.front(), converged);
  std::vector<point> neighbours;
  for (std::size_t axis : {0u, 1u})
    for (int dir : {-1, 1}) {
      point q = converged;
      q[axis] += dir;
      if (q != sampled[1]) neighbours.push_back(q);  // (the best other point may be one of them)
    }
  EXPECT_EQ(std::vector<point>(sampled.begin() + 2, sampled.begin() + 2 + static_cast<std::ptrdiff_t>(neighbours.size())),
            neighbours);
}

/// The points a re-search puts in force, from a drop until it converges, on a model whose peak
/// moved on every axis.
std::vector<point> re_search_points(const tuner_options& o, point& converged) {
  auto s = knob_space(8).value();
  tuner t(s, o, to_point(s, poor_start()));
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5}, moved{0.3, 0.8, 0.3, 0.9, 0.1};
  EXPECT_TRUE(converge(t, s, peak, 200));
  t.on_window(model(s, t.current(), peak));  // the converged level
  converged = t.current();
  std::vector<point> in_force;
  for (int w = 0; w < 200; ++w) {
    auto step = t.on_window(0.5 * model(s, t.current(), moved));
    if (step.switch_to) in_force.push_back(*step.switch_to);
    if (step.converged) break;
  }
  EXPECT_EQ(t.phase(), tuner_phase::watching);
  return in_force;
}

TEST(TuningTuner, AReSearchKeepsCycleTimeAndInPlaceThreshold) {
  // A network change moves streams, chunk and fusion sizes; the re-search holds the knobs that
  // follow the compute (axes 3 and 4), even where the model's peak moved them too.
  // Free, the same searches move them in most seeds (23 of 30 over seeds 1-30).
  int moved_free = 0;
  const int seeds = 10;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    tuner_options o = small_search(seed, 1);
    point converged;
    auto points = re_search_points(o, converged);
    ASSERT_GE(points.size(), static_cast<std::size_t>(o.retune_samples)) << "seed " << seed;
    for (const auto& p : points) {
      EXPECT_EQ(p[3], converged[3]) << "seed " << seed;
      EXPECT_EQ(p[4], converged[4]) << "seed " << seed;
    }
    o.retune_pinned_axes.clear();
    points = re_search_points(o, converged);
    moved_free += std::any_of(points.begin(), points.end(),
                              [&](const point& p) { return p[3] != converged[3] || p[4] != converged[4]; });
  }
  std::printf("free re-searches that moved cycle time or in-place threshold: %d of %d\n", moved_free, seeds);
  EXPECT_GE(moved_free, seeds / 2);
}

TEST(TuningTuner, AReSearchFindsTheChunkSizeWhenOnlyThatMoved) {
  // Slow connections leave a tail of large chunks: the best chunk size drops two steps (a
  // quarter), the best stream count stays. Over 40 seeds: >= 95% of the new best in 37 (36
  // before the re-search sampled its best point's chunk neighbours; 11 when only the stream
  // counts next to the converged one are sampled).
  auto s = knob_space(8).value();
  tuner_options o;
  o.search.max_samples = 30;
  o.search.noise = 0.02;
  const std::vector<double> smaller_chunks{0.6, 0.25, 0.55, 0.3, 0.5};
  int near_best = 0;
  const int seeds = 8;
  for (int seed = 20; seed < 20 + seeds; ++seed) {
    o.search.seed = static_cast<uint64_t>(seed);
    auto l = live(s, o, static_cast<uint64_t>(seed) * 31 + 5, change::at_once, smaller_chunks);
    ASSERT_TRUE(l.retuned) << "seed " << seed;
    EXPECT_GE(l.retuned_at, l.stale) << "seed " << seed;
    near_best += l.retuned_at >= 0.95 * l.new_best;
  }
  EXPECT_GE(near_best, seeds - 2);
}

TEST(TuningTuner, ALuckySampleAfterConvergingDoesNotSetTheLevel) {
  auto s = knob_space(8).value();
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  tuner_options o = small_search(3, 1);
  tuner t(s, o, to_point(s, poor_start()));
  ASSERT_TRUE(converge(t, s, peak, 100));
  const double level = model(s, t.current(), peak);
  // The first sample watching is 25% lucky; the point then scores its usual level: no search.
  ASSERT_TRUE(t.on_window(1.25 * level).sample);
  for (int w = 0; w < 10; ++w) EXPECT_FALSE(t.on_window(level).searching_again) << "window " << w;
  // A real drop still starts one.
  bool again = false;
  for (int w = 0; w < o.drop_windows; ++w) again = t.on_window(0.5 * level).searching_again || again;
  EXPECT_TRUE(again);
}

TEST(TuningTuner, AShortSlumpIsCheckedByOneSampleAndTheTunerWatchesOn) {
  auto s = knob_space(8).value();
  std::vector<double> peak{0.6, 0.5, 0.55, 0.3, 0.5};
  tuner_options o = small_search(3, 3);
  tuner t(s, o, to_point(s, poor_start()));
  ASSERT_TRUE(converge(t, s, peak, 200));
  const point converged = t.current();
  const double level = model(s, converged, peak);
  for (int w = 0; w < 3; ++w) t.on_window(level);  // the converged level
  const uint64_t samples = t.samples();
  const std::size_t known = t.optimizer().history().size();
  // Three slow windows (load on the machine) look like a drop; the sample that follows is back
  // at the level: one sample at the point in force, then watching again with what it knew.
  bool again = false;
  for (int w = 0; w < o.drop_windows; ++w) again = t.on_window(0.7 * level).searching_again || again;
  ASSERT_TRUE(again);
  bool back = false;
  for (int w = 0; w < 3; ++w) {
    auto step = t.on_window(level);
    EXPECT_FALSE(step.switch_to) << "window " << w;
    back = back || step.converged;
  }
  EXPECT_TRUE(back);
  EXPECT_EQ(t.phase(), tuner_phase::watching);
  EXPECT_EQ(t.current(), converged);
  EXPECT_EQ(t.samples(), samples + 1);
  EXPECT_EQ(t.optimizer().history().size(), known);
  // A drop that lasts is searched.
  again = false;
  for (int w = 0; w < o.drop_windows; ++w) again = t.on_window(0.5 * level).searching_again || again;
  ASSERT_TRUE(again);
  for (int w = 0; w < 3; ++w) t.on_window(0.5 * level);
  EXPECT_EQ(t.phase(), tuner_phase::searching);
}

TEST(TuningTuner, ANetworkChangeDuringAReSearchStartsItOnceMore) {
  // A load spike starts a search; the network changes two samples into it, so its best points
  // were measured on the old network. Sampled again they all score far lower: the tuner must
  // search again rather than settle on a fit of two networks.
  auto s = knob_space(8).value();
  tuner_options o;
  o.search.max_samples = 30;
  o.search.noise = 0.02;
  // Over 40 seeds: better than staying in 40, mean 0.976 of the new best (0.973 before it
  // sampled its best point's chunk neighbours; 0.86 when the
  // re-search sampled only stream-count neighbours; 0.65 without the restart).
  double sum = 0;
  const int seeds = 8;
  for (int seed = 20; seed < 20 + seeds; ++seed) {
    o.search.seed = static_cast<uint64_t>(seed);
    auto l = live(s, o, static_cast<uint64_t>(seed) * 31 + 5, change::mid_re_search);
    ASSERT_TRUE(l.retuned) << "seed " << seed;
    EXPECT_EQ(l.searches_after, 2u) << "seed " << seed << ": the drift during the search was not noticed";
    EXPECT_GE(l.retuned_at, l.stale) << "seed " << seed;
    EXPECT_LE(l.retune_samples,
              2u * static_cast<uint64_t>(o.retune_samples + 2 * o.confirm_chunk_steps + o.confirm_points + o.confirm_raw_best) + 1)
        << "seed " << seed;
    sum += l.retuned_at / l.new_best;
  }
  EXPECT_GE(sum / seeds, 0.8);
}

TEST(TuningTuner, SameScoresSameSwitchesAndDigests) {
  auto s = knob_space(8).value();
  tuner_options o;
  o.search.seed = 99;
  std::vector<tuner> ranks(3, tuner(s, o, to_point(s, poor_start())));
  std::mt19937_64 rng(1234);
  for (int w = 0; w < 150; ++w) {
    double score = std::uniform_real_distribution<double>(1e8, 2e8)(rng);
    auto a = ranks[0].on_window(score);
    for (int r = 1; r < 3; ++r) {
      auto b = ranks[static_cast<std::size_t>(r)].on_window(score);
      ASSERT_EQ(a.switch_to, b.switch_to) << "window " << w;
      ASSERT_EQ(ranks[0].digest(), ranks[static_cast<std::size_t>(r)].digest()) << "window " << w;
    }
  }
  // One different score makes the digests differ.
  ranks[1].on_window(1.0);
  ranks[2].on_window(2.0);
  EXPECT_NE(ranks[1].digest(), ranks[2].digest());
}

}  // namespace
}  // namespace chorus::tuning
