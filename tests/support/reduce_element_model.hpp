// The element types as the reduction kernels' tests model them, independently of
// runtime/collectives/reduce.cpp (formats: tests/support/float_model.hpp): each dtype's width and
// format, raw element access, random element bits (specials and extremes among them), and
// readable gtest parameter names. Shared by reduce_test.cpp and reduce_float_kernels_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>

#include "runtime/collectives/reduce.hpp"
#include "tests/support/float_model.hpp"

namespace chorus {

// Readable parameter values in gtest's output ("f16", "sum") instead of raw bytes.
inline void PrintTo(dtype t, std::ostream* os) { *os << name_of(t); }
inline void PrintTo(reduce_op op, std::ostream* os) { *os << name_of(op); }

namespace testing {

static_assert(std::endian::native == std::endian::little, "element access below assumes it");

struct type_info {
  dtype t;
  std::size_t width;
  bool is_float;
  float_format format;   // floats only
  bool combines_in_f32;  // f16, bf16
};

inline type_info info(dtype t) {
  switch (t) {
    case dtype::f16: return {t, 2, true, f16_format, true};
    case dtype::bf16: return {t, 2, true, bf16_format, true};
    case dtype::f32: return {t, 4, true, f32_format, false};
    case dtype::f64: return {t, 8, true, f64_format, false};
    case dtype::i32: return {t, 4, false, {}, false};
    case dtype::i64: return {t, 8, false, {}, false};
    case dtype::u8: return {t, 1, false, {}, false};
    case dtype::i8: return {t, 1, false, {}, false};
    case dtype::i16: return {t, 2, false, {}, false};
    case dtype::boolean: return {t, 1, false, {}, false};
  }
  return {};
}

inline uint64_t load_bits(const uint8_t* p, std::size_t width) {
  uint64_t v = 0;
  std::memcpy(&v, p, width);
  return v;
}

inline uint64_t width_mask(std::size_t width) {
  return width == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;
}

// Mostly ordinary values, near 1 so that sums round and cancel; some anywhere in range
// (subnormals, overflow on product); some specials and extremes.
inline uint64_t random_bits(const type_info& ti, std::mt19937_64& rng) {
  const uint64_t r = rng(), r2 = rng(), kind = r2 % 10;
  if (!ti.is_float) {
    static const int64_t extremes[] = {0, 1, -1, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 255};
    if (kind < 4) return r & width_mask(ti.width);
    if (kind < 8) return uint64_t(int64_t(r % 201) - 100) & width_mask(ti.width);
    return uint64_t(extremes[r % 8]) & width_mask(ti.width);
  }
  const float_format& f = ti.format;
  const uint64_t sign = (r >> 63) << (f.bits - 1);
  const uint64_t mant = r & ((uint64_t{1} << f.mant_bits) - 1);
  const uint64_t exp_all = (uint64_t{1} << f.exp_bits) - 1;
  if (kind < 4) {
    const uint64_t e = (r2 >> 8) % exp_all;  // any finite exponent, 0 (subnormal) included
    return sign | (e << f.mant_bits) | mant;
  }
  if (kind < 8) {
    const uint64_t e = uint64_t(f.bias() - 3 + int((r2 >> 8) % 7));
    return sign | (e << f.mant_bits) | mant;
  }
  switch (r % 6) {
    case 0: return sign;                                                   // +-0
    case 1: return sign | (exp_all << f.mant_bits);                        // +-inf
    case 2: return (exp_all << f.mant_bits) | (uint64_t{1} << (f.mant_bits - 1));  // NaN
    case 3: return sign | ((exp_all - 1) << f.mant_bits) | ((uint64_t{1} << f.mant_bits) - 1);
    case 4: return sign | 1;                                               // smallest subnormal
    default: return sign | (uint64_t{1} << f.mant_bits);                   // smallest normal
  }
}

inline void fill_random(const type_info& ti, uint8_t* p, std::size_t count, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < count; ++i) {
    const uint64_t b = random_bits(ti, rng);
    std::memcpy(p + i * ti.width, &b, ti.width);
  }
}

inline std::string param_name(const ::testing::TestParamInfo<std::tuple<dtype, reduce_op>>& p) {
  return std::string(name_of(std::get<0>(p.param))) + "_" +
         std::string(name_of(std::get<1>(p.param)));
}

}  // namespace testing
}  // namespace chorus
