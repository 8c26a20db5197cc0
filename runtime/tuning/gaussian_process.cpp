// Gaussian process fit and prediction (Eigen's LLT), and expected improvement.
#include "runtime/tuning/gaussian_process.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <numbers>

namespace chorus::tuning {
namespace {

constexpr double length_grid[] = {0.08, 0.15, 0.25, 0.4, 0.7, 1.2};
constexpr double jitter = 1e-9;

struct factor {
  Eigen::MatrixXd l;
  Eigen::VectorXd alpha;
  double lml = -std::numeric_limits<double>::infinity();
  bool ok = false;
};

factor factorise(const std::vector<std::vector<double>>& x, const Eigen::VectorXd& y, double noise, double length) {
  auto n = static_cast<Eigen::Index>(x.size());
  Eigen::MatrixXd k(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j <= i; ++j)
      k(i, j) = k(j, i) = gaussian_process::kernel(x[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(j)], length);
  k.diagonal().array() += noise + jitter;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  factor f;
  if (llt.info() != Eigen::Success) return f;
  f.l = llt.matrixL();
  f.alpha = llt.solve(y);
  f.lml = -0.5 * y.dot(f.alpha) - f.l.diagonal().array().log().sum() - 0.5 * double(n) * std::log(2 * std::numbers::pi);
  f.ok = true;
  return f;
}

}  // namespace

double gaussian_process::kernel(const std::vector<double>& a, const std::vector<double>& b, double length) {
  double r2 = 0;
  for (std::size_t d = 0; d < a.size(); ++d) r2 += (a[d] - b[d]) * (a[d] - b[d]);
  double s = std::sqrt(5.0 * r2) / length;
  return (1 + s + s * s / 3) * std::exp(-s);
}

gaussian_process gaussian_process::fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
                                       double noise) {
  gaussian_process gp;
  if (x.empty()) return gp;
  gp.x_ = x;
  auto n = static_cast<Eigen::Index>(y.size());
  Eigen::VectorXd v = Eigen::Map<const Eigen::VectorXd>(y.data(), n);
  gp.y_mean_ = v.mean();
  double var = n > 1 ? (v.array() - gp.y_mean_).square().sum() / double(n) : 0.0;
  gp.y_sd_ = var > 0 ? std::sqrt(var) : (std::fabs(gp.y_mean_) > 0 ? std::fabs(gp.y_mean_) : 1.0);
  Eigen::VectorXd z = (v.array() - gp.y_mean_) / gp.y_sd_;
  factor best;
  for (double length : length_grid) {
    auto f = factorise(x, z, noise, length);
    if (f.ok && f.lml > best.lml) {  // strict: ties keep the shorter length, on every rank alike
      best = std::move(f);
      gp.length_ = length;
    }
  }
  if (!best.ok) {  // cannot happen with noise + jitter > 0; fall back to the prior
    gp.x_.clear();
    return gp;
  }
  gp.lml_ = best.lml;
  gp.alpha_.assign(best.alpha.data(), best.alpha.data() + n);
  gp.chol_.resize(static_cast<std::size_t>(n * n));
  Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(gp.chol_.data(), n, n) = best.l;
  return gp;
}

gaussian_process::prediction gaussian_process::predict(const std::vector<double>& at) const {
  if (x_.empty()) return {y_mean_, y_sd_};
  auto n = static_cast<Eigen::Index>(x_.size());
  Eigen::VectorXd ks(n);
  for (Eigen::Index i = 0; i < n; ++i) ks(i) = kernel(x_[static_cast<std::size_t>(i)], at, length_);
  Eigen::Map<const Eigen::VectorXd> alpha(alpha_.data(), n);
  Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> l(chol_.data(), n, n);
  double mean = ks.dot(alpha);
  Eigen::VectorXd v = l.triangularView<Eigen::Lower>().solve(ks);
  double var = std::max(1.0 - v.squaredNorm(), 1e-12);
  return {y_mean_ + mean * y_sd_, std::sqrt(var) * y_sd_};
}

double expected_improvement(const gaussian_process::prediction& p, double best, double xi) {
  double gain = p.mean - best - xi;
  if (p.stddev <= 0) return std::max(gain, 0.0);
  double z = gain / p.stddev;
  double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
  double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
  return std::max(gain * cdf + p.stddev * pdf, 0.0);
}

}  // namespace chorus::tuning
