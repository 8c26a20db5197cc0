// Bayesian optimisation over a discrete, log-scaled search space: a few warm-up points (the
// starting points given, then a seeded Latin hypercube over the rest), then the point of
// highest expected improvement under a Gaussian process fitted to every sample so far. It
// stops at a sample budget or when the best expected improvement is negligible. Every answer
// is a pure function of (space, options, starting points, history), so ranks that feed it the
// same agreed scores propose the same points: no random_device, no clock, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tuning/search_space.hpp"

namespace chorus::tuning {

struct optimizer_options {
  uint64_t seed = 1;               ///< every pseudo-random choice derives from it
  int warmup_samples = 3;          ///< samples taken before the Gaussian process proposes
  int max_samples = 20;            ///< the budget: no proposal after this many samples
  double noise = 0.1;              ///< added to the kernel diagonal, in normalised score units
  double min_improvement = 0.005;  ///< stop when the best expected improvement < this * |best|
  int min_proposals = 3;           ///< ... but not before this many points after the warm-up
  double exploration = 0.01;       ///< EI's margin xi, relative to |best|
  int candidates = 384;            ///< pseudo-random candidates per proposal (plus neighbours)
  /// Per axis, the index every proposal keeps (-1 or absent: free). Pinned axes make a smaller
  /// space: the warm-up, the candidates and the "nothing left to sample" count stay inside it.
  /// Starting points are taken as given.
  std::vector<int> pinned;
};

struct observation {
  point at;
  double score = 0;
};

struct proposal {
  point at;
  bool warmup = false;                 ///< a starting or pseudo-random point, not the GP's
  double expected_improvement = 0;     ///< relative to |best| (0 for warm-up points)
};

class bayes_optimizer {
 public:
  /// `start`: points to sample first (they count as warm-up samples), e.g. the best points of
  /// an earlier search. Points outside the space are ignored.
  bayes_optimizer(search_space space, optimizer_options options, std::vector<point> start = {});

  /// The next point to sample; nullopt once the search is over (budget spent or no
  /// candidate's expected improvement reaches min_improvement).
  std::optional<proposal> next() const;
  /// Records a sample (the score of point `at`; higher is better).
  void observe(point at, double score);

  /// The sampled point with the highest posterior mean (robust to one lucky sample), with its
  /// observed score; nullopt before the first sample.
  std::optional<observation> best() const;
  /// Up to `k` distinct sampled points, highest posterior mean first (the candidates to sample
  /// again before settling on one).
  std::vector<point> ranked(std::size_t k) const;
  const std::vector<observation>& history() const { return history_; }
  const search_space& space() const { return space_; }
  const optimizer_options& options() const { return options_; }

 private:
  bool sampled(const point& p) const;
  point random_point(uint64_t draw) const;
  /// Row `row` of a seeded Latin hypercube of `rows` rows over the free axes: along each axis
  /// the rows take different strata of the log-scaled range (row < rows).
  point design_point(std::size_t row, std::size_t rows) const;
  /// The pinned index of axis d, or -1.
  int pin(std::size_t d) const;
  /// The number of points the proposals may take (the free axes' product; saturates at 2^62).
  uint64_t free_size() const;

  search_space space_;
  optimizer_options options_;
  std::vector<point> start_;
  std::vector<observation> history_;
};

/// splitmix64: the deterministic mixer behind every pseudo-random choice of the tuner.
uint64_t mix64(uint64_t x);

}  // namespace chorus::tuning
