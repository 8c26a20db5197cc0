// The autotuner's optimiser on known functions (runtime/tuning/bayes_optimizer.hpp): it finds
// a 2-D quadratic's maximum within a sample budget, its proposals are a pure function of its
// inputs, instances fed the same scores propose the same points, and pinned axes hold.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/tuning/bayes_optimizer.hpp"
#include "runtime/tuning/gaussian_process.hpp"
#include "runtime/tuning/search_space.hpp"

namespace chorus::tuning {
namespace {

search_space grid_2d() {
  // Two log axes of 17 points each: 1..2^16 in powers of two.
  return search_space::make({axis::powers_of_two("a", 1, 65536), axis::powers_of_two("b", 1, 65536)}).value();
}

// A concave quadratic in the log coordinates with its maximum at a=2^11, b=2^4.
double quadratic(const search_space& s, const point& p) {
  auto u = s.unit(p);
  double da = u[0] - 11.0 / 16, db = u[1] - 4.0 / 16;
  return 100.0 - 80 * da * da - 120 * db * db;
}

TEST(TuningSearchSpace, LogScaledUnitCoordinates) {
  auto s = search_space::make({axis::powers_of_two("x", 1024, 1 << 20), axis::log_integers("streams", 1, 8, 8)});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->axes()[0].values.size(), 11u);
  EXPECT_EQ(s->axes()[1].values, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  auto u = s->unit({5, 0});
  EXPECT_DOUBLE_EQ(u[0], 0.5);
  EXPECT_EQ(s->nearest({30000, 3.2}), (point{5, 2}));  // 32768 is nearer than 16384 on a log scale
  EXPECT_EQ(s->snap_unit({0.52, 1.0}), (point{5, 7}));
  EXPECT_EQ(s->snap_axis(0, 0.52), 5);
  EXPECT_EQ(s->snap_axis(0, 0.54), 5);
  EXPECT_EQ(s->snap_axis(0, 0.56), 6);
  EXPECT_EQ(s->snap_axis(1, 0.0), 0);
  auto bad = search_space::make({axis{"chunk", {4, 2}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("chunk"), std::string::npos);
}

TEST(TuningGaussianProcess, InterpolatesAndIsUncertainAway) {
  std::vector<std::vector<double>> x{{0.0}, {0.5}, {1.0}};
  std::vector<double> y{1.0, 3.0, 2.0};
  auto gp = gaussian_process::fit(x, y, 1e-6);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(gp.predict(x[i]).mean, y[i], 1e-3);
    EXPECT_LT(gp.predict(x[i]).stddev, 0.01);
  }
  EXPECT_GT(gp.predict({0.25}).stddev, gp.predict({0.5}).stddev);
  // EI is zero far below the incumbent and positive when the mean may beat it.
  EXPECT_NEAR(expected_improvement({0.0, 1e-9}, 3.0, 0.0), 0.0, 1e-12);
  EXPECT_GT(expected_improvement({2.9, 0.5}, 3.0, 0.0), 0.0);
}

TEST(TuningOptimizer, FindsQuadraticMaximumWithinBudget) {
  auto s = grid_2d();
  optimizer_options o;
  o.seed = 7;
  o.warmup_samples = 4;
  o.max_samples = 30;
  o.noise = 1e-4;
  o.min_improvement = 1e-4;
  bayes_optimizer opt(s, o, {point{0, 16}});
  int used = 0;
  while (auto p = opt.next()) {
    opt.observe(p->at, quadratic(s, p->at));
    ++used;
  }
  ASSERT_LE(used, 30);
  auto best = opt.best();
  ASSERT_TRUE(best);
  // The grid has 289 points; the optimum is (11, 4). Within one step on each axis, and the
  // value within 1% of the maximum.
  EXPECT_LE(std::abs(best->at[0] - 11), 1) << s.describe(best->at) << " after " << used << " samples";
  EXPECT_LE(std::abs(best->at[1] - 4), 1) << s.describe(best->at);
  EXPECT_GT(quadratic(s, best->at), 99.0);
}

TEST(TuningOptimizer, APinnedAxisKeepsItsValueAndShrinksTheSpace) {
  // b pinned at 2^9 (index 9): every proposal keeps it, the search finds a's best on that line,
  // and it ends once the line's 17 points are sampled (the start, off the line, is taken too).
  auto s = grid_2d();
  optimizer_options o;
  o.seed = 11;
  o.max_samples = 100;
  o.min_improvement = 0;
  o.pinned = {-1, 9};
  bayes_optimizer opt(s, o, {point{0, 16}});
  int used = 0;
  while (auto p = opt.next()) {
    if (used > 0) EXPECT_EQ(p->at[1], 9) << s.describe(p->at);
    opt.observe(p->at, quadratic(s, p->at));
    ++used;
  }
  EXPECT_EQ(used, 18);
  auto ranked = opt.ranked(1);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked.front(), (point{11, 9}));
}

TEST(TuningOptimizer, AFlatWarmUpDoesNotStopTheSearchBeforeItsOwnProposals) {
  // Equal scores at the warm-up points: the fit is flat and no candidate promises a gain, but
  // the search still proposes min_proposals points of its own before it may stop.
  auto s = grid_2d();
  for (int min_proposals : {0, 3}) {
    optimizer_options o;
    o.seed = 3;
    o.warmup_samples = 3;
    o.max_samples = 20;
    o.min_improvement = 0.5;  // nothing promises 50%
    o.min_proposals = min_proposals;
    bayes_optimizer opt(s, o);
    int used = 0;
    while (auto p = opt.next()) {
      EXPECT_EQ(p->warmup, used < 3);
      opt.observe(p->at, 10.0);
      ++used;
    }
    EXPECT_EQ(used, 3 + min_proposals);
  }
}

TEST(TuningOptimizer, WarmUpCoversEveryAxisLikeALatinHypercube) {
  // After the starting point, five warm-up rows: along each axis they take the five strata of
  // the range, one each (17 values: the middles 0.1, 0.3, ... 0.9 snap to 2, 5, 8, 11, 14), so
  // no axis is left at one end by chance. The order of the strata depends on the seed.
  auto s = grid_2d();
  std::vector<std::vector<int>> orders;
  for (uint64_t seed : {1, 2, 3, 4}) {
    optimizer_options o;
    o.seed = seed;
    o.warmup_samples = 6;
    bayes_optimizer opt(s, o, {point{0, 16}});
    std::vector<int> a, b;
    for (int i = 0; i < 6; ++i) {
      auto p = opt.next();
      ASSERT_TRUE(p && p->warmup);
      if (i == 0) EXPECT_EQ(p->at, (point{0, 16}));
      if (i > 0) a.push_back(p->at[0]), b.push_back(p->at[1]);
      opt.observe(p->at, quadratic(s, p->at));
    }
    orders.push_back(a);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, (std::vector<int>{2, 5, 8, 11, 14})) << "seed " << seed;
    EXPECT_EQ(b, (std::vector<int>{2, 5, 8, 11, 14})) << "seed " << seed;
  }
  EXPECT_FALSE(orders[0] == orders[1] && orders[1] == orders[2] && orders[2] == orders[3]);
}

TEST(TuningOptimizer, FindsQuadraticMaximumUnderNoise) {
  auto s = grid_2d();
  optimizer_options o;
  o.seed = 3;
  o.max_samples = 30;
  o.noise = 0.05;
  std::mt19937_64 rng(11);  // the noise of the "measurements"; the optimiser has its own seed
  std::normal_distribution<double> noise(0.0, 0.5);
  bayes_optimizer opt(s, o, {point{0, 16}});
  while (auto p = opt.next()) opt.observe(p->at, quadratic(s, p->at) + noise(rng));
  EXPECT_LE(opt.history().size(), 30u);
  EXPECT_GT(quadratic(s, opt.best()->at), 97.0) << s.describe(opt.best()->at);
}

TEST(TuningOptimizer, SameInputsSameProposals) {
  auto s = grid_2d();
  optimizer_options o;
  o.seed = 42;
  bayes_optimizer a(s, o), b(s, o);
  for (int i = 0; i < 12; ++i) {
    auto pa = a.next(), pa_again = a.next(), pb = b.next();
    ASSERT_TRUE(pa && pb);
    EXPECT_EQ(pa->at, pa_again->at);
    EXPECT_EQ(pa->at, pb->at);
    EXPECT_EQ(pa->expected_improvement, pb->expected_improvement);
    double score = quadratic(s, pa->at);
    a.observe(pa->at, score);
    b.observe(pb->at, score);
  }
  // A different seed changes the warm-up points.
  o.seed = 43;
  bayes_optimizer c(s, o);
  bayes_optimizer d(s, optimizer_options{.seed = 42});
  EXPECT_NE(c.next()->at, d.next()->at);
}

TEST(TuningOptimizer, ThreeInstancesAgreeOnHundredRandomSequences) {
  auto s = search_space::make({axis::log_integers("streams", 1, 8, 8), axis::powers_of_two("chunk", 65536, 1 << 24),
                               axis::powers_of_two("fusion", 1 << 20, 1 << 27), axis::log_spaced("cycle", 0.125, 8, 7),
                               axis::powers_of_two("in_place", 1 << 17, 1 << 26)})
               .value();
  uint64_t seed = 20261126;
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("score seed " + std::to_string(seed));
  for (int seq = 0; seq < 100; ++seq) {
    optimizer_options o;
    o.seed = rng();
    o.max_samples = 8;
    std::vector<bayes_optimizer> ranks(3, bayes_optimizer(s, o, {point{7, 6, 6, 3, 3}}));
    for (int i = 0; i < 8; ++i) {
      auto p0 = ranks[0].next();
      for (int r = 1; r < 3; ++r) {
        auto pr = ranks[r].next();
        ASSERT_EQ(p0.has_value(), pr.has_value()) << "sequence " << seq << " sample " << i;
        if (p0) ASSERT_EQ(p0->at, pr->at) << "sequence " << seq << " sample " << i << " rank " << r;
      }
      if (!p0) break;
      double score = std::uniform_real_distribution<double>(1, 2)(rng);
      for (auto& r : ranks) r.observe(p0->at, score);
    }
  }
}

}  // namespace
}  // namespace chorus::tuning
