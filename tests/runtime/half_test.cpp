// Tests of the 16-bit float conversions (runtime/core/half.hpp): IEEE binary16 (f16) and
// bfloat16 (bf16) to and from f32, against a reference written independently here: values are
// decoded from their bit fields and rounded with std::nearbyint in double. That the reduction
// kernels' own 16-bit paths agree with these functions is checked in reduce_test.cpp.
// Randomised tests print their seed once per process; CHORUS_TEST_SEED=<n> re-runs with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <random>
#include <string>

#include "runtime/core/half.hpp"
#include "tests/support/float_model.hpp"
#include "tests/support/test_seed.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace chorus {
namespace {

using namespace chorus::testing;

uint64_t test_seed() { return base_seed("half_test", 20240611); }

// ---- the conversions -----------------------------------------------------------------------

struct half_case {
  const char* name;
  float_format format;
  float (*to_f32)(uint16_t);
  uint16_t (*from_f32)(float);
  uint16_t quiet_bit;  // what a NaN gains on the way through f32
  uint16_t inf;
};
const half_case half_cases[] = {{"f16", f16_format, f16_to_f32, f32_to_f16, 0x0200, 0x7c00},
                                {"bf16", bf16_format, bf16_to_f32, f32_to_bf16, 0x0040, 0x7f80}};

void PrintTo(const half_case& c, std::ostream* os) { *os << c.name; }

class HalfTest : public ::testing::TestWithParam<half_case> {};

bool is_nan_bits(const half_case& c, uint16_t h) { return (h & 0x7fff) > c.inf; }

TEST_P(HalfTest, EveryPatternWidensExactlyAndRoundTrips) {
  const half_case& c = GetParam();
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = c.to_f32(uint16_t(h));
    ASSERT_TRUE(same_value(decode(c.format, h), f)) << std::hex << "h=0x" << h;
    ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << "h=0x" << h;
    const uint16_t back = c.from_f32(f);
    ASSERT_EQ(back, is_nan_bits(c, h) ? (h | c.quiet_bit) : h) << std::hex << "h=0x" << h;
  }
}

// Between every two neighbours (the one after the largest finite value being 2^(emax+1),
// whose pattern is infinity), the midpoint rounds to the even pattern, and one f32 ulp to
// either side rounds to the nearer neighbour. Covers subnormals, the subnormal/normal boundary
// and overflow to infinity, for both signs.
TEST_P(HalfTest, MidpointsRoundToEvenAndNeighboursToNearest) {
  const half_case& c = GetParam();
  for (uint16_t h = 0; h < c.inf; ++h) {
    const double lo = decode(c.format, h);
    const double hi = h + 1 == c.inf ? std::ldexp(1.0, c.format.bias() + 1)
                                     : decode(c.format, uint16_t(h + 1));
    const float mid = float((lo + hi) / 2);
    ASSERT_EQ(double(mid), (lo + hi) / 2) << "midpoint not exact in f32";
    const uint16_t even = (h & 1) ? uint16_t(h + 1) : h;
    for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
      const float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(c.from_f32(s * mid), even | sign) << std::hex << "h=0x" << h;
      ASSERT_EQ(c.from_f32(s * std::nextafter(mid, 0.0f)), h | sign) << std::hex << "h=0x" << h;
      ASSERT_EQ(c.from_f32(s * std::nextafter(mid, INFINITY)), (h + 1) | sign)
          << std::hex << "h=0x" << h;
    }
  }
}

TEST_P(HalfTest, RandomFloatsRoundLikeTheReference) {
  const half_case& c = GetParam();
  std::mt19937_64 rng(test_seed() + c.format.mant_bits);
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t bits = uint32_t(rng());
    const float f = std::bit_cast<float>(bits);
    const uint16_t h = c.from_f32(f);
    ASSERT_TRUE(same_value(round_to(c.format, f), decode(c.format, h)))
        << std::hex << "f=0x" << bits << " got=0x" << h;
  }
}

TEST_P(HalfTest, SpecialValues) {
  const half_case& c = GetParam();
  EXPECT_EQ(c.from_f32(INFINITY), c.inf);
  EXPECT_EQ(c.from_f32(-INFINITY), c.inf | 0x8000);
  EXPECT_EQ(c.from_f32(-0.0f), 0x8000);
  EXPECT_EQ(c.from_f32(std::numeric_limits<float>::max()), c.inf);  // rounds past the largest
  EXPECT_EQ(c.from_f32(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(c.from_f32(-std::numeric_limits<float>::denorm_min()), 0x8000);
  // A NaN stays a NaN even when its payload lives only in the bits that are dropped.
  for (uint32_t nan : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu}) {
    const uint16_t h = c.from_f32(std::bit_cast<float>(nan));
    EXPECT_TRUE(is_nan_bits(c, h)) << std::hex << "nan=0x" << nan << " got=0x" << h;
    EXPECT_EQ(bool(h & 0x8000), bool(nan >> 31));
  }
  EXPECT_TRUE(std::isnan(c.to_f32(c.inf | 1)));
  EXPECT_EQ(c.to_f32(c.inf), INFINITY);
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfTest, ::testing::ValuesIn(half_cases),
                         [](const auto& p) { return std::string(p.param.name); });

#if defined(__x86_64__) || defined(__i386__)
[[gnu::target("avx2,f16c")]] void hardware_widen(const uint16_t* in, float* out) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
}
[[gnu::target("avx2,f16c")]] void hardware_narrow(const float* in, uint16_t* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
}

// The kernels use F16C where the CPU has it; the portable functions must give the same bits,
// NaNs included. Every f16 pattern, and every 4099th f32 pattern (about a million).
TEST(HalfConversion, PortableF16MatchesF16cBitForBit) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx) ||
      !(ecx & bit_F16C))
    GTEST_SKIP() << "CPU without AVX2 and F16C";
  uint16_t h[8];
  float f[8];
  for (uint32_t base = 0; base < 65536; base += 8) {
    for (int k = 0; k < 8; ++k) h[k] = uint16_t(base + k);
    hardware_widen(h, f);
    for (int k = 0; k < 8; ++k)
      ASSERT_EQ(std::bit_cast<uint32_t>(f16_to_f32(h[k])), std::bit_cast<uint32_t>(f[k]))
          << std::hex << "h=0x" << h[k];
  }
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += 8 * 4099) {
    for (int k = 0; k < 8; ++k) f[k] = std::bit_cast<float>(uint32_t(base + k * 4099));
    hardware_narrow(f, h);
    for (int k = 0; k < 8; ++k)
      ASSERT_EQ(f32_to_f16(f[k]), h[k]) << std::hex << "f=0x" << std::bit_cast<uint32_t>(f[k]);
  }
}
#endif

}  // namespace
}  // namespace chorus
