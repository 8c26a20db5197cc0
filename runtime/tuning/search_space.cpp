// Axes and points of the autotuner's search space (log scale, normalised coordinates).
#include "runtime/tuning/search_space.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/config/variables.hpp"

namespace chorus::tuning {

axis axis::powers_of_two(std::string name, double lo, double hi) {
  axis a{std::move(name), {}};
  for (double v = lo; v <= hi * (1 + 1e-12); v *= 2) a.values.push_back(v);
  return a;
}

axis axis::log_integers(std::string name, int lo, int hi, int count) {
  axis a{std::move(name), {}};
  if (lo == hi || count < 2) {
    a.values.push_back(lo);
    if (hi != lo) a.values.push_back(hi);
    return a;
  }
  if (hi - lo + 1 <= count) {  // room for every whole number
    for (int v = lo; v <= hi; ++v) a.values.push_back(v);
    return a;
  }
  for (int i = 0; i < count; ++i) {
    double v = std::round(lo * std::pow(double(hi) / lo, double(i) / (count - 1)));
    if (a.values.empty() || v > a.values.back()) a.values.push_back(v);
  }
  return a;
}

axis axis::log_spaced(std::string name, double lo, double hi, int count) {
  axis a{std::move(name), {}};
  if (lo == hi || count < 2) {
    a.values.push_back(lo);
    return a;
  }
  for (int i = 0; i < count; ++i) a.values.push_back(lo * std::pow(hi / lo, double(i) / (count - 1)));
  return a;
}

result<search_space> search_space::make(std::vector<axis> axes) {
  search_space s;
  for (const auto& a : axes) {
    if (a.values.empty()) return status{errc::invalid_argument, "autotune axis '" + a.name + "' has no values"};
    for (std::size_t i = 0; i < a.values.size(); ++i) {
      if (!(a.values[i] > 0))
        return status{errc::invalid_argument, "autotune axis '" + a.name + "': value " +
                                                  cfg::number_text(a.values[i]) + " is not positive (log scale)"};
      if (i > 0 && !(a.values[i] > a.values[i - 1]))
        return status{errc::invalid_argument, "autotune axis '" + a.name + "': values not increasing at " +
                                                  cfg::number_text(a.values[i])};
    }
    std::vector<double> u;
    double l0 = std::log(a.values.front()), span = std::log(a.values.back()) - l0;
    for (double v : a.values) u.push_back(span > 0 ? (std::log(v) - l0) / span : 0.0);
    s.unit_.push_back(std::move(u));
  }
  s.axes_ = std::move(axes);
  return s;
}

uint64_t search_space::size() const {
  uint64_t n = 1;
  for (const auto& a : axes_) {
    if (n > (uint64_t{1} << 62) / a.values.size()) return uint64_t{1} << 62;
    n *= a.values.size();
  }
  return n;
}

std::vector<double> search_space::unit(const point& p) const {
  std::vector<double> u(p.size());
  for (std::size_t d = 0; d < p.size(); ++d) u[d] = unit_[d][static_cast<std::size_t>(p[d])];
  return u;
}

std::vector<double> search_space::values(const point& p) const {
  std::vector<double> v(p.size());
  for (std::size_t d = 0; d < p.size(); ++d) v[d] = axes_[d].values[static_cast<std::size_t>(p[d])];
  return v;
}

int search_space::snap_axis(std::size_t d, double u) const {
  const auto& c = unit_[d];
  std::size_t best = 0;
  for (std::size_t i = 1; i < c.size(); ++i)
    if (std::fabs(c[i] - u) < std::fabs(c[best] - u)) best = i;
  return static_cast<int>(best);
}

point search_space::snap_unit(const std::vector<double>& u) const {
  point p(axes_.size());
  for (std::size_t d = 0; d < axes_.size(); ++d) p[d] = snap_axis(d, u[d]);
  return p;
}

point search_space::nearest(const std::vector<double>& values) const {
  point p(axes_.size());
  for (std::size_t d = 0; d < axes_.size(); ++d) {
    const auto& vs = axes_[d].values;
    double lv = std::log(std::max(values[d], 1e-300));
    std::size_t best = 0;
    for (std::size_t i = 1; i < vs.size(); ++i)
      if (std::fabs(std::log(vs[i]) - lv) < std::fabs(std::log(vs[best]) - lv)) best = i;
    p[d] = static_cast<int>(best);
  }
  return p;
}

bool search_space::contains(const point& p) const {
  if (p.size() != axes_.size()) return false;
  for (std::size_t d = 0; d < p.size(); ++d)
    if (p[d] < 0 || static_cast<std::size_t>(p[d]) >= axes_[d].values.size()) return false;
  return true;
}

std::string search_space::describe(const point& p) const {
  std::string out;
  auto v = values(p);
  for (std::size_t d = 0; d < v.size(); ++d) out += (d ? " " : "") + axes_[d].name + "=" + cfg::number_text(v[d]);
  return out;
}

}  // namespace chorus::tuning
