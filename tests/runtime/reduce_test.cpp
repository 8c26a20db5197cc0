// Tests of the reduction kernels (runtime/collectives/reduce.hpp) for every (dtype, op):
// reduce_into, reduce_to and their aliasing, divide_by and a whole average, bool as logic, narrow
// integers and the aborts on bad arguments; and a child run of the AllTypes suites on the portable
// kernels. Float min/max commutation and the 16-bit paths: reduce_float_kernels_test.cpp.
// The reference is written independently here (element model: tests/support/
// reduce_element_model.hpp): values are decoded from their bit fields and rounded with
// std::nearbyint in double.
// Randomised tests print their seed once per process; CHORUS_TEST_SEED=<n> re-runs with it.
//
// Why the comparisons are exact (no tolerance): one IEEE operation is correctly rounded, and
// rounding a result first to q bits and then to p <= (q - 2) / 2 bits equals rounding it once
// to p bits (Figueroa, "When is double rounding innocuous?"). So for f32, double(x) op double(y)
// rounded to f32 is what the f32 operation gives (53 >= 2*24 + 2); f16 (11 bits) and bf16
// (8 bits) are specified as "combine in f32, round once", which the reference models as
// round_to(half, round_to(f32, x op y)), and for f16 that is even the correctly rounded result.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/collectives/neutral_elements.hpp"
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

// ---- independent model of the element types (tests/support/reduce_element_model.hpp) -------

using namespace chorus::testing;

uint64_t test_seed() { return base_seed("reduce_test", 20240611); }

// The integer value of stored bits: sign-extended for the signed types, zero-extended for u8.
int64_t int_value(const type_info& ti, uint64_t bits) {
  if (ti.t == dtype::u8 || ti.width == 8) return int64_t(bits);
  if (ti.width == 1) return int64_t(int8_t(uint8_t(bits)));
  if (ti.width == 2) return int64_t(int16_t(uint16_t(bits)));
  return int64_t(int32_t(uint32_t(bits)));
}

// Rounds an exact-or-double result the way the kernels' spec says it is stored.
double store_rounding(const type_info& ti, double r) {
  if (ti.combines_in_f32) r = round_to(f32_format, r);
  return round_to(ti.format, r);
}

double ref_float(reduce_op op, double x, double y) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average: return x + y;
    case reduce_op::product: return x * y;
    // NaN if either is; -0 counts as below +0 (equal values differ at most in a zero's sign).
    case reduce_op::min:
      if (std::isnan(x) || std::isnan(y)) return NAN;
      return x < y ? x : y < x ? y : std::signbit(x) ? x : y;
    case reduce_op::max:
      if (std::isnan(x) || std::isnan(y)) return NAN;
      return x > y ? x : y > x ? y : std::signbit(x) ? y : x;
    default: return NAN;  // bitwise ops take integers only
  }
}

uint64_t ref_int(const type_info& ti, reduce_op op, uint64_t xb, uint64_t yb) {
  const int64_t x = int_value(ti, xb), y = int_value(ti, yb);
  uint64_t r = 0;
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average: r = uint64_t(x) + uint64_t(y); break;
    case reduce_op::product: r = uint64_t(x) * uint64_t(y); break;
    case reduce_op::min: r = uint64_t(x < y ? x : y); break;
    case reduce_op::max: r = uint64_t(x > y ? x : y); break;
    case reduce_op::band: r = uint64_t(x) & uint64_t(y); break;
    case reduce_op::bor: r = uint64_t(x) | uint64_t(y); break;
    case reduce_op::bxor: r = uint64_t(x) ^ uint64_t(y); break;
  }
  return r & width_mask(ti.width);
}

// Elements at a chosen misalignment, with guard bytes around them that every call must leave.
class guarded_buffer {
 public:
  static constexpr std::size_t guard = 64;
  static constexpr uint8_t pattern = 0xa5;
  guarded_buffer(std::size_t bytes, std::size_t offset)
      : raw_(bytes + offset + 2 * guard, pattern), offset_(offset), bytes_(bytes) {}
  uint8_t* data() { return raw_.data() + guard + offset_; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < raw_.size(); ++i) {
      const bool inside = i >= guard + offset_ && i < guard + offset_ + bytes_;
      if (!inside && raw_[i] != pattern) return false;
    }
    return true;
  }

 private:
  std::vector<uint8_t> raw_;
  std::size_t offset_, bytes_;
};

// Checks got[i] == x[i] (op) y[i] for all i; reports the first few differences.
void expect_combined(const type_info& ti, reduce_op op, const std::vector<uint8_t>& x,
                     const std::vector<uint8_t>& y, const uint8_t* got, std::size_t count) {
  int reported = 0;
  for (std::size_t i = 0; i < count && reported < 5; ++i) {
    const uint64_t xb = load_bits(&x[i * ti.width], ti.width);
    const uint64_t yb = load_bits(&y[i * ti.width], ti.width);
    const uint64_t gb = load_bits(got + i * ti.width, ti.width);
    bool ok;
    std::string want;
    if (ti.is_float) {
      const double w =
          store_rounding(ti, ref_float(op, decode(ti.format, xb), decode(ti.format, yb)));
      ok = same_value(w, decode(ti.format, gb));
      want = std::to_string(w);
    } else {
      const uint64_t w = ref_int(ti, op, xb, yb);
      ok = w == gb;
      want = std::to_string(w);
    }
    if (!ok) {
      ++reported;
      ADD_FAILURE() << name_of(ti.t) << " " << name_of(op) << " element " << i << " of "
                    << count << ": x=0x" << std::hex << xb << " y=0x" << yb << " got=0x" << gb
                    << std::dec << " want " << want;
    }
  }
}

std::vector<uint8_t> copy_of(const uint8_t* p, std::size_t bytes) { return {p, p + bytes}; }

const std::size_t sizes[] = {0, 1, 7, 1000, 4097};
struct offsets {
  std::size_t out, a, b;
};
const offsets misalignments[] = {{0, 0, 0}, {1, 3, 0}, {2, 0, 5}, {7, 1, 2}};

// ---- reduce_into / reduce_to for every (dtype, op) ----------------------------------------

class ReduceTest : public ::testing::TestWithParam<std::tuple<dtype, reduce_op>> {
 protected:
  type_info ti = info(std::get<0>(GetParam()));
  reduce_op op = std::get<1>(GetParam());
  std::mt19937_64 rng{test_seed() + 131 * int(ti.t) + int(op)};
};

TEST_P(ReduceTest, IntoMatchesReference) {
  for (std::size_t n : sizes) {
    for (const offsets& o : misalignments) {
      SCOPED_TRACE("count=" + std::to_string(n) + " dst offset=" + std::to_string(o.out) +
                   " src offset=" + std::to_string(o.a));
      guarded_buffer dst(n * ti.width, o.out), src(n * ti.width, o.a);
      fill_random(ti, dst.data(), n, rng);
      fill_random(ti, src.data(), n, rng);
      const auto x = copy_of(dst.data(), n * ti.width), y = copy_of(src.data(), n * ti.width);
      reduce_into(dst.data(), src.data(), n, ti.t, op);
      expect_combined(ti, op, x, y, dst.data(), n);
      EXPECT_EQ(copy_of(src.data(), n * ti.width), y) << "src was modified";
      EXPECT_TRUE(dst.guards_intact() && src.guards_intact()) << "wrote outside the buffers";
    }
  }
}

TEST_P(ReduceTest, ToMatchesReferenceIntoAThirdBuffer) {
  for (std::size_t n : sizes) {
    for (const offsets& o : misalignments) {
      SCOPED_TRACE("count=" + std::to_string(n) + " offsets out/a/b=" + std::to_string(o.out) +
                   "/" + std::to_string(o.a) + "/" + std::to_string(o.b));
      guarded_buffer out(n * ti.width, o.out), a(n * ti.width, o.a), b(n * ti.width, o.b);
      fill_random(ti, a.data(), n, rng);
      fill_random(ti, b.data(), n, rng);
      const auto x = copy_of(a.data(), n * ti.width), y = copy_of(b.data(), n * ti.width);
      reduce_to(out.data(), a.data(), b.data(), n, ti.t, op);
      expect_combined(ti, op, x, y, out.data(), n);
      EXPECT_EQ(copy_of(a.data(), n * ti.width), x) << "a was modified";
      EXPECT_EQ(copy_of(b.data(), n * ti.width), y) << "b was modified";
      EXPECT_TRUE(out.guards_intact()) << "wrote outside the output";
    }
  }
}

// The output may be exactly a, exactly b, or both; reduce_into may get the same buffer twice.
TEST_P(ReduceTest, OutputMayBeEitherInput) {
  const std::size_t n = 1000;
  for (int alias = 0; alias < 4; ++alias) {
    SCOPED_TRACE("alias case " + std::to_string(alias));
    guarded_buffer p(n * ti.width, 3), q(n * ti.width, 1);
    fill_random(ti, p.data(), n, rng);
    fill_random(ti, q.data(), n, rng);
    const auto pv = copy_of(p.data(), n * ti.width), qv = copy_of(q.data(), n * ti.width);
    switch (alias) {
      case 0: reduce_to(p.data(), p.data(), q.data(), n, ti.t, op); break;  // out == a
      case 1: reduce_to(q.data(), p.data(), q.data(), n, ti.t, op); break;  // out == b
      case 2: reduce_to(p.data(), p.data(), p.data(), n, ti.t, op); break;  // out == a == b
      case 3: reduce_into(p.data(), p.data(), n, ti.t, op); break;          // dst == src
    }
    if (alias == 1)
      expect_combined(ti, op, pv, qv, q.data(), n);
    else if (alias == 0)
      expect_combined(ti, op, pv, qv, p.data(), n);
    else
      expect_combined(ti, op, pv, pv, p.data(), n);
    EXPECT_TRUE(p.guards_intact() && q.guards_intact());
  }
}


const dtype all_dtypes[] = {dtype::f16, dtype::bf16, dtype::f32, dtype::f64, dtype::i32,
                            dtype::i64, dtype::u8,  dtype::i8,  dtype::i16};
const reduce_op all_ops[] = {reduce_op::sum, reduce_op::average, reduce_op::min, reduce_op::max,
                             reduce_op::product};

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes),
                                            ::testing::ValuesIn(all_ops)),
                         param_name);

// band, bor and bxor: integer types only.
const dtype integer_dtypes[] = {dtype::i32, dtype::i64, dtype::u8, dtype::i8, dtype::i16};
const reduce_op bitwise_ops[] = {reduce_op::band, reduce_op::bor, reduce_op::bxor};
INSTANTIATE_TEST_SUITE_P(Bitwise, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(integer_dtypes), ::testing::ValuesIn(bitwise_ops)),
                         param_name);

// ---- divide_by and a whole average --------------------------------------------------------

class DivideTest : public ::testing::TestWithParam<dtype> {
 protected:
  type_info ti = info(GetParam());
  std::mt19937_64 rng{test_seed() + 7919 * int(ti.t)};

  // What element bits x become after divide_by(q): floats in the spec's rounding, signed
  // integers truncated toward zero, u8 unsigned.
  bool divided_ok(uint64_t xb, uint64_t gb, int q) const {
    if (ti.is_float)
      return same_value(store_rounding(ti, decode(ti.format, xb) / q), decode(ti.format, gb));
    return (uint64_t(int_value(ti, xb) / q) & width_mask(ti.width)) == gb;
  }
};

TEST_P(DivideTest, MatchesReference) {
  for (int q : {1, 2, 3, 7, 1000, 1 << 24}) {
    for (std::size_t n : sizes) {
      SCOPED_TRACE("divisor=" + std::to_string(q) + " count=" + std::to_string(n));
      guarded_buffer d(n * ti.width, 1 + n % 3);
      fill_random(ti, d.data(), n, rng);
      const auto x = copy_of(d.data(), n * ti.width);
      divide_by(d.data(), n, ti.t, q);
      int reported = 0;
      for (std::size_t i = 0; i < n && reported < 5; ++i) {
        const uint64_t xb = load_bits(&x[i * ti.width], ti.width);
        const uint64_t gb = load_bits(d.data() + i * ti.width, ti.width);
        if (!divided_ok(xb, gb, q) && ++reported)
          ADD_FAILURE() << "element " << i << ": x=0x" << std::hex << xb << " got=0x" << gb;
      }
      EXPECT_TRUE(d.guards_intact());
    }
  }
}

// Four ranks' contributions reduced with `average` one after another, then divided once: each
// step rounds as specified, so the reference follows the same steps.
TEST_P(DivideTest, AverageOfFourContributions) {
  const std::size_t n = 4097, bytes = n * ti.width;
  std::vector<std::vector<uint8_t>> rank(4, std::vector<uint8_t>(bytes));
  for (auto& r : rank) fill_random(ti, r.data(), n, rng);
  std::vector<uint8_t> acc = rank[0];
  for (int r = 1; r < 4; ++r) reduce_into(acc.data(), rank[r].data(), n, ti.t, reduce_op::average);
  divide_by(acc.data(), n, ti.t, 4);
  int reported = 0;
  for (std::size_t i = 0; i < n && reported < 5; ++i) {
    uint64_t want_bits = load_bits(&rank[0][i * ti.width], ti.width);
    double want = ti.is_float ? decode(ti.format, want_bits) : 0;
    for (int r = 1; r < 4; ++r) {
      const uint64_t b = load_bits(&rank[r][i * ti.width], ti.width);
      if (ti.is_float)
        want = store_rounding(ti, want + decode(ti.format, b));
      else
        want_bits = ref_int(ti, reduce_op::sum, want_bits, b);
    }
    const uint64_t gb = load_bits(&acc[i * ti.width], ti.width);
    const bool ok = ti.is_float
                        ? same_value(store_rounding(ti, want / 4), decode(ti.format, gb))
                        : (uint64_t(int_value(ti, want_bits) / 4) & width_mask(ti.width)) == gb;
    if (!ok && ++reported) ADD_FAILURE() << "element " << i << " got=0x" << std::hex << gb;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DivideTest, ::testing::ValuesIn(all_dtypes),
                         [](const auto& p) { return std::string(name_of(p.param)); });

TEST(DivideBy, IntegersTruncateTowardZero) {
  int32_t i32[] = {-7, 7, -1, INT32_MIN};
  divide_by(i32, 4, dtype::i32, 2);
  EXPECT_EQ(i32[0], -3);
  EXPECT_EQ(i32[1], 3);
  EXPECT_EQ(i32[2], 0);
  EXPECT_EQ(i32[3], INT32_MIN / 2);
  uint8_t u8[] = {255, 3};
  divide_by(u8, 2, dtype::u8, 2);
  EXPECT_EQ(u8[0], 127);
  EXPECT_EQ(u8[1], 1);
}

// ---- broken invariants abort with the operands named --------------------------------------

// bool (0/1 bytes) reduces as logic: sum, max and bor are "or", min, product and band are
// "and", bxor is "exclusive or"; the join filler's identity is false for "or" and "exclusive
// or", true for "and".
TEST(BoolReduce, SumAndMaxAreOrMinAndProductAreAnd) {
  const uint8_t a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1};
  const std::pair<reduce_op, std::array<uint8_t, 4>> cases[] = {{reduce_op::sum, {0, 1, 1, 1}},
                                                                 {reduce_op::max, {0, 1, 1, 1}},
                                                                 {reduce_op::bor, {0, 1, 1, 1}},
                                                                 {reduce_op::min, {0, 0, 0, 1}},
                                                                 {reduce_op::product, {0, 0, 0, 1}},
                                                                 {reduce_op::band, {0, 0, 0, 1}},
                                                                 {reduce_op::bxor, {0, 1, 1, 0}}};
  for (const auto& [op, want] : cases) {
    uint8_t x[4];
    std::memcpy(x, a, 4);
    reduce_into(x, b, 4, dtype::boolean, op);
    EXPECT_EQ(std::vector<uint8_t>(x, x + 4), std::vector<uint8_t>(want.begin(), want.end())) << name_of(op);
    uint8_t id[3] = {7, 7, 7};
    fill_identity(id, 3, dtype::boolean, op);
    const uint8_t e = op == reduce_op::min || op == reduce_op::product || op == reduce_op::band ? 1 : 0;
    EXPECT_EQ(std::vector<uint8_t>(id, id + 3), std::vector<uint8_t>(3, e)) << name_of(op);
  }
}

TEST(NarrowIntegers, AverageDividesInIntSoALargeDivisorGivesZero) {
  int8_t i8[] = {-128, 127, -7};
  divide_by(i8, 3, dtype::i8, 2);
  EXPECT_EQ(std::vector<int8_t>(i8, i8 + 3), (std::vector<int8_t>{-64, 63, -3}));
  divide_by(i8, 3, dtype::i8, 1000);
  EXPECT_EQ(std::vector<int8_t>(i8, i8 + 3), (std::vector<int8_t>{0, 0, 0}));
  int16_t i16[] = {-32768, 32767};
  divide_by(i16, 2, dtype::i16, 3);
  EXPECT_EQ(std::vector<int16_t>(i16, i16 + 2), (std::vector<int16_t>{-10922, 10922}));
}

TEST(ReduceDeathTest, BadArgumentsAbortWithTheirValues) {
  float buf[16] = {};
  EXPECT_DEATH(divide_by(buf, 4, dtype::f32, 0), "divisor=0");
  EXPECT_DEATH(reduce_into(buf + 2, buf, 4, dtype::f32, reduce_op::sum), "partially overlaps");
  EXPECT_DEATH(reduce_to(buf, buf + 8, buf + 1, 8, dtype::f32, reduce_op::sum),
               "partially overlaps");
  EXPECT_DEATH(reduce_into(buf, buf + 8, 4, static_cast<dtype>(42), reduce_op::sum),
               "unknown dtype value 42");
  EXPECT_DEATH(reduce_into(buf, buf + 8, 4, dtype::f32, static_cast<reduce_op>(9)),
               "unknown reduce_op value 9");
  EXPECT_DEATH(reduce_into(nullptr, buf, 1, dtype::f32, reduce_op::sum), "null with count=1");
  EXPECT_DEATH(reduce_into(buf, buf + 8, 4, dtype::f32, reduce_op::bxor), "bxor of f32; bitwise ops take integer");
  reduce_into(nullptr, nullptr, 0, dtype::f32, reduce_op::sum);  // nothing to do: fine
}

// ---- both kernel builds -------------------------------------------------------------------

// The kernels pick a build per process (portable, or AVX2 + F16C). This runs the kernel tests
// again in a child process forced onto the portable build, so both are checked on this CPU
// (reduce_float_kernels_test.cpp does the same for its FloatTypes and KernelPatterns suites).
TEST(ReduceKernels, PortableBuildPassesTheSameTests) {
  if (std::getenv("CHORUS_REDUCE_KERNELS")) GTEST_SKIP() << "already the child run";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "CHORUS_REDUCE_KERNELS=portable CHORUS_TEST_SEED=" +
                          std::to_string(test_seed()) + " '" + self + "' --gtest_brief=1 " +
                          "--gtest_filter='AllTypes/*'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace chorus
