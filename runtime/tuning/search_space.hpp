// The autotuner's search space: a few axes, each a sorted list of allowed values on a log
// scale. A point is one index per axis, so points compare exactly (no float drift between
// ranks); the optimiser sees a point as coordinates in [0, 1]^d, log-scaled and normalised.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::tuning {

/// One tunable dimension: allowed values (positive, strictly increasing).
struct axis {
  std::string name;
  std::vector<double> values;

  /// lo, lo*2, lo*4, ... up to hi (hi included when it is lo * 2^k).
  static axis powers_of_two(std::string name, double lo, double hi);
  /// Every whole number from lo to hi when there are at most `count`; else up to `count` of them,
  /// spaced about evenly on a log scale
  /// (lo and hi always included).
  static axis log_integers(std::string name, int lo, int hi, int count);
  /// `count` values from lo to hi, evenly spaced on a log scale (count >= 2 unless lo == hi).
  static axis log_spaced(std::string name, double lo, double hi, int count);
};

/// A point of the space: one index into each axis' values.
using point = std::vector<int>;

class search_space {
 public:
  search_space() = default;
  /// errc::invalid_argument when an axis is empty, holds a value <= 0 or is not increasing.
  static result<search_space> make(std::vector<axis> axes);

  std::size_t dims() const { return axes_.size(); }
  const std::vector<axis>& axes() const { return axes_; }
  /// Number of points (the product of the axis sizes; saturates at 2^62).
  uint64_t size() const;
  /// log-scaled, normalised coordinates of p: (log v - log v_min) / (log v_max - log v_min);
  /// 0 on an axis with one value.
  std::vector<double> unit(const point& p) const;
  /// The values p stands for.
  std::vector<double> values(const point& p) const;
  /// The point whose values are nearest to `values` on the log scale, per axis.
  point nearest(const std::vector<double>& values) const;
  /// The point with the nearest coordinates to `u` in [0,1]^d.
  point snap_unit(const std::vector<double>& u) const;
  /// The index of axis d's value whose coordinate is nearest to `u`.
  int snap_axis(std::size_t d, double u) const;
  bool contains(const point& p) const;
  /// "streams=4 chunk_bytes=1048576 ..."
  std::string describe(const point& p) const;

 private:
  std::vector<axis> axes_;
  std::vector<std::vector<double>> unit_;  // per axis, the coordinate of each value
};

}  // namespace chorus::tuning
