// An independent model of binary floating-point formats, for checking the conversions and
// reductions against double precision: decode any bit pattern, round to nearest even into a
// format with its subnormals and overflow to infinity.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace chorus::testing {

struct float_format {
  int bits, exp_bits, mant_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
};
constexpr float_format f16_format{16, 5, 10}, bf16_format{16, 8, 7}, f32_format{32, 8, 23},
    f64_format{64, 11, 52};

inline double decode(const float_format& f, uint64_t bits) {
  const bool negative = (bits >> (f.bits - 1)) & 1;
  const uint64_t e = (bits >> f.mant_bits) & ((uint64_t{1} << f.exp_bits) - 1);
  const uint64_t m = bits & ((uint64_t{1} << f.mant_bits) - 1);
  double v;
  if (e == (uint64_t{1} << f.exp_bits) - 1)
    v = m ? std::nan("") : INFINITY;
  else if (e == 0)
    v = std::ldexp(double(m), 1 - f.bias() - f.mant_bits);
  else
    v = std::ldexp(double(m | (uint64_t{1} << f.mant_bits)), int(e) - f.bias() - f.mant_bits);
  return negative ? -v : v;
}

/// Round to nearest even into format f (f64: unchanged).
inline double round_to(const float_format& f, double x) {
  if (f.bits == 64 || !std::isfinite(x) || x == 0) return x;
  const int p = f.mant_bits + 1;
  const int e = std::max(std::ilogb(x), 1 - f.bias());
  const double q = std::ldexp(std::nearbyint(std::ldexp(x, p - 1 - e)), e - (p - 1));
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - p), f.bias());
  return std::fabs(q) > max_finite ? std::copysign(INFINITY, x) : q;
}

/// Equal values with equal signs, or both NaN.
inline bool same_value(double want, double got) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  return want == got && std::signbit(want) == std::signbit(got);
}

}  // namespace chorus::testing
