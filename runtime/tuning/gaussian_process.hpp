// A Gaussian process regressor for the autotuner: Matern 5/2 kernel on coordinates in
// [0, 1]^d, scores normalised to mean 0 and standard deviation 1, a fixed noise term on the
// diagonal and the length scale picked from a small grid by marginal likelihood. Eigen does
// the linear algebra (in the .cpp only). Deterministic: equal inputs give equal bits.
#pragma once

#include <vector>

namespace chorus::tuning {

class gaussian_process {
 public:
  struct prediction {
    double mean = 0;    ///< in the units of the fitted scores
    double stddev = 0;  ///< of the latent function (noise excluded), same units
  };

  /// Fits to scores y at points x (all of one dimension). `noise` is added to the kernel's
  /// diagonal in normalised units (Horovod's HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE). An
  /// empty x gives the prior (mean 0, stddev 1).
  static gaussian_process fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
                              double noise);

  prediction predict(const std::vector<double>& at) const;
  double length_scale() const { return length_; }
  double log_marginal_likelihood() const { return lml_; }

  /// The kernel between two points for length scale `length` (unit signal variance).
  static double kernel(const std::vector<double>& a, const std::vector<double>& b, double length);

 private:
  std::vector<std::vector<double>> x_;
  std::vector<double> alpha_;   // K^-1 (y - mean) / sd
  std::vector<double> chol_;    // lower Cholesky factor of K + noise I, row-major n x n
  double y_mean_ = 0, y_sd_ = 1;
  double length_ = 0.3;
  double lml_ = 0;
};

/// Expected improvement over `best` of a prediction, for maximisation, with exploration
/// margin `xi` (same units): E[max(f - best - xi, 0)].
double expected_improvement(const gaussian_process::prediction& p, double best, double xi);

}  // namespace chorus::tuning
