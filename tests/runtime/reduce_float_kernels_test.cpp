// Tests of the reduction kernels (runtime/collectives/reduce.hpp) on floats: min and max commute
// bit for bit (signed zeros, NaNs), and the kernels' 16-bit paths agree with the portable
// conversions; and a child run of those suites on the portable kernels. The other kernel tests
// are in reduce_test.cpp. The 16-bit conversions themselves (runtime/core/half.hpp) are tested in
// half_test.cpp; here only that the kernels' 16-bit paths agree with them.
// Element model: tests/support/reduce_element_model.hpp (formats: tests/support/float_model.hpp).
// Randomised tests print their seed once per process; CHORUS_TEST_SEED=<n> re-runs with it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/collectives/reduce.hpp"
#include "runtime/config/config.hpp"
#include "tests/support/float_model.hpp"
#include "tests/support/reduce_element_model.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

// The process-wide settings as a rank has them (runtime/config): the child run below is forced
// onto the portable kernels by CHORUS_REDUCE_KERNELS.
[[maybe_unused]] const bool kSettingsRead = read_config().ok();

using namespace chorus::testing;

// The same fallback seed as reduce_test.cpp.
uint64_t test_seed() { return base_seed("reduce_float_kernels_test", 20240611); }

// ---- float min and max commute bit for bit ---------------------------------------------------
// Two ranks of a recursive-doubling exchange compute op(mine, theirs) and op(theirs, mine) and
// must end with the same bits: min(-0, +0) = -0 and max(-0, +0) = +0 in either order, and any
// NaN operand gives the canonical NaN.

uint64_t canonical_nan(dtype t) {
  switch (t) {
    case dtype::f16: return 0x7e00;
    case dtype::bf16: return 0x7fc0;
    case dtype::f32: return 0x7fc00000;
    default: return 0x7ff8000000000000;
  }
}

// min/max of two stored values, by value with -0 below +0: equal values have the same bits or
// are zeros that differ in the sign, which OR (min) or AND (max) settles.
uint64_t expected_min_max(const type_info& ti, reduce_op op, uint64_t xb, uint64_t yb) {
  const double x = decode(ti.format, xb), y = decode(ti.format, yb);
  if (std::isnan(x) || std::isnan(y)) return canonical_nan(ti.t);
  const bool min = op == reduce_op::min;
  if (x != y) return (x < y) == min ? xb : yb;
  return min ? (xb | yb) : (xb & yb);
}

class MinMaxTest : public ::testing::TestWithParam<std::tuple<dtype, reduce_op>> {
 protected:
  type_info ti = info(std::get<0>(GetParam()));
  reduce_op op = std::get<1>(GetParam());
  std::mt19937_64 rng{test_seed() + 977 * int(ti.t) + int(op)};
  uint64_t sign = uint64_t{1} << (ti.format.bits - 1);

  uint64_t at(const std::vector<uint8_t>& v, std::size_t i) const {
    return load_bits(&v[i * ti.width], ti.width);
  }

  // Both argument orders, each into a third buffer, into the first input and into the second
  // (the kernels' three loops): all six must give the same bits, and the expected ones.
  void expect_commutes(const std::vector<uint8_t>& x, const std::vector<uint8_t>& y) {
    const std::size_t n = x.size() / ti.width;
    std::vector<uint8_t> first;
    for (int way = 0; way < 6; ++way) {
      std::vector<uint8_t> a = way % 2 ? y : x, b = way % 2 ? x : y, out(x.size());
      uint8_t* o = way < 2 ? out.data() : way < 4 ? a.data() : b.data();
      reduce_to(o, a.data(), b.data(), n, ti.t, op);
      const std::vector<uint8_t> got(o, o + x.size());
      if (way == 0) first = got;
      for (std::size_t i = 0; i < n; ++i) {
        const uint64_t want =
            way == 0 ? expected_min_max(ti, op, at(x, i), at(y, i)) : at(first, i);
        if (at(got, i) == want) continue;
        ADD_FAILURE() << name_of(ti.t) << " " << name_of(op) << " way " << way << " element "
                      << i << std::hex << ": x=0x" << at(x, i) << " y=0x" << at(y, i)
                      << " got=0x" << at(got, i) << " want=0x" << want;
        break;
      }
    }
  }
};

// Every ordered pair of zeros, ones, infinities, NaNs of both signs with different payloads
// (quiet and signalling), smallest subnormals and largest finite values: 225 pairs, so both
// whole 16-bit blocks and a tail.
TEST_P(MinMaxTest, SpecialPairsCommute) {
  const int m = ti.format.mant_bits;
  const uint64_t mant = (uint64_t{1} << m) - 1, quiet = uint64_t{1} << (m - 1);
  const uint64_t inf = ((uint64_t{1} << ti.format.exp_bits) - 1) << m;
  const uint64_t one = uint64_t(ti.format.bias()) << m, max_finite = (inf - mant - 1) | mant;
  const uint64_t specials[] = {0,          sign,           one,        sign | one,
                               inf,        sign | inf,     inf | 1,    inf | quiet,
                               inf | quiet | 5,            sign | inf | quiet,
                               sign | inf | mant,          1,          sign | 1,
                               max_finite, sign | max_finite};
  std::vector<uint8_t> x, y;
  for (uint64_t a : specials) {
    for (uint64_t b : specials) {
      x.insert(x.end(), reinterpret_cast<const uint8_t*>(&a),
               reinterpret_cast<const uint8_t*>(&a) + ti.width);
      y.insert(y.end(), reinterpret_cast<const uint8_t*>(&b),
               reinterpret_cast<const uint8_t*>(&b) + ti.width);
    }
  }
  expect_commutes(x, y);
  const uint64_t zero = op == reduce_op::min ? sign : 0;  // -0 for min, +0 for max
  EXPECT_EQ(expected_min_max(ti, op, 0, sign), zero);
  EXPECT_EQ(expected_min_max(ti, op, sign, 0), zero);
}

// Random values (specials among them); a quarter of the pairs equal and a quarter differing
// only in the sign bit, so that ties of -0 and +0 and pairs of NaNs come up often.
TEST_P(MinMaxTest, RandomPairsCommute) {
  const std::size_t n = 4097;
  std::vector<uint8_t> x(n * ti.width), y(n * ti.width);
  fill_random(ti, x.data(), n, rng);
  fill_random(ti, y.data(), n, rng);
  for (std::size_t i = 0; i < n; ++i) {
    const uint64_t r = rng() % 4, yb = r == 0 ? at(x, i) : at(x, i) ^ sign;
    if (r < 2) std::memcpy(&y[i * ti.width], &yb, ti.width);
  }
  expect_commutes(x, y);
}

const dtype float_dtypes[] = {dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
INSTANTIATE_TEST_SUITE_P(FloatTypes, MinMaxTest,
                         ::testing::Combine(::testing::ValuesIn(float_dtypes),
                                            ::testing::Values(reduce_op::min, reduce_op::max)),
                         param_name);

// ---- the kernels' 16-bit paths agree with the portable conversions -------------------------

struct half_kind {
  const char* name;
  dtype t;
  uint16_t inf;
  uint16_t quiet_bit;  // what a NaN gains on the way through f32
};
const half_kind half_kinds[] = {{"f16", dtype::f16, 0x7c00, 0x0200},
                                {"bf16", dtype::bf16, 0x7f80, 0x0040}};

// Every 16-bit pattern through the kernels' widen-combine-narrow path, whichever it is on this
// CPU. Adding -0 leaves every value as it is (+0 + -0 = +0), and a NaN keeps its sign and
// payload and comes out quiet, as the portable conversions make it (half_test.cpp checks those
// against F16C). Min and max of a value with itself give the value, and a NaN the canonical NaN.
TEST(KernelPatterns, EveryHalfPatternSurvivesTheKernels) {
  for (const half_kind& k : half_kinds) {
    std::vector<uint16_t> all(65536), out(65536), minus_zero(65536, 0x8000);
    for (uint32_t h = 0; h < 65536; ++h) all[h] = uint16_t(h);
    auto is_nan = [&](uint32_t h) { return (h & 0x7fff) > k.inf; };
    reduce_to(out.data(), all.data(), minus_zero.data(), all.size(), k.t, reduce_op::sum);
    for (uint32_t h = 0; h < 65536; ++h)
      ASSERT_EQ(out[h], is_nan(h) ? (h | k.quiet_bit) : h) << k.name << std::hex << " h=0x" << h;
    for (reduce_op op : {reduce_op::max, reduce_op::min}) {
      reduce_to(out.data(), all.data(), all.data(), all.size(), k.t, op);
      for (uint32_t h = 0; h < 65536; ++h)
        ASSERT_EQ(out[h], is_nan(h) ? canonical_nan(k.t) : h)
            << k.name << " " << name_of(op) << std::hex << " h=0x" << h;
    }
  }
}

// ---- both kernel builds -------------------------------------------------------------------

// The kernels pick a build per process (portable, or AVX2 + F16C). This runs this file's kernel
// tests again in a child process forced onto the portable build, so both are checked on this CPU
// (reduce_test.cpp does the same for its AllTypes suites).
TEST(FloatKernels, PortableBuildPassesTheSameTests) {
  if (std::getenv("CHORUS_REDUCE_KERNELS")) GTEST_SKIP() << "already the child run";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "CHORUS_REDUCE_KERNELS=portable CHORUS_TEST_SEED=" +
                          std::to_string(test_seed()) + " '" + self + "' --gtest_brief=1 " +
                          "--gtest_filter='FloatTypes/*:KernelPatterns.*'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace chorus
