// Tests of the compression casts (runtime/compression/cast.hpp): every kernel flavour this CPU
// runs (portable, AVX2 + F16C, AVX-512) against the scalar conversions of half.hpp (which
// half_test.cpp holds to an independent reference): rounding to nearest even, ties, NaN, Inf,
// subnormals, f64 sources, scaling, odd lengths and unaligned pointers, and the NaN/Inf flag.
// Randomised tests print their seed once per process; CHORUS_TEST_SEED=<n> re-runs with it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/compression/cast.hpp"
#include "runtime/core/half.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using chorus::testing::base_seed;

uint64_t seed() { return base_seed("cast_test", 20261126); }

std::vector<cast_detail::kernels> flavours() {
  std::size_t n = 0;
  const auto* k = cast_detail::available(n);
  return {k, k + n};
}

uint16_t reference_narrow(compression c, float x) { return c == compression::fp16 ? f32_to_f16(x) : f32_to_bf16(x); }
float reference_widen(compression c, uint16_t h) { return c == compression::fp16 ? f16_to_f32(h) : bf16_to_f32(h); }
bool nonfinite(float x) { return !std::isfinite(x); }

// f32 inputs that hit every rounding case: every wire value, the midpoints between neighbours
// (ties), one f32 ulp either side of them, f32 subnormals, NaNs with payloads, infinities,
// overflow boundaries, and random bit patterns.
std::vector<float> f32_inputs(compression c, std::mt19937_64& rng) {
  std::vector<float> v;
  for (uint32_t h = 0; h < 65536; h += 1) {
    const float a = reference_widen(c, uint16_t(h));
    v.push_back(a);
    const float b = reference_widen(c, uint16_t(h + 1));
    if (std::isfinite(a) && std::isfinite(b) && (h & 0x7fff) != 0x7fff) {
      const float mid = float((double(a) + double(b)) / 2);
      v.push_back(mid);
      v.push_back(std::nextafter(mid, a));
      v.push_back(std::nextafter(mid, b));
    }
  }
  for (uint32_t bits : {0x00000001u, 0x807fffffu, 0x00400000u, 0x7f800001u, 0xffc12345u, 0x7fbfffffu, 0x477fefffu,
                        0x477ff000u, 0x7f7fffffu, 0xff7fffffu, 0x33000000u, 0x33000001u, 0xb3800000u})
    v.push_back(std::bit_cast<float>(bits));
  for (int i = 0; i < 200000; ++i) v.push_back(std::bit_cast<float>(uint32_t(rng())));
  return v;
}

class CastTest : public ::testing::TestWithParam<compression> {};

TEST_P(CastTest, NarrowF32MatchesScalarReferenceInEveryFlavour) {
  const compression c = GetParam();
  std::mt19937_64 rng(seed());
  const auto in = f32_inputs(c, rng);
  for (const auto& k : flavours()) {
    for (float scale : {1.0f, 0.25f, 3.0f}) {
      // One byte of offset: the kernels take any alignment.
      std::vector<std::byte> src(in.size() * 4 + 1), out(in.size() * 2 + 1);
      std::memcpy(src.data() + 1, in.data(), in.size() * 4);
      k.narrow(out.data() + 1, c, src.data() + 1, dtype::f32, in.size(), scale);
      for (std::size_t i = 0; i < in.size(); ++i) {
        uint16_t got;
        std::memcpy(&got, out.data() + 1 + 2 * i, 2);
        ASSERT_EQ(got, reference_narrow(c, in[i] * scale))
            << k.name << " " << name_of(c) << " scale=" << scale << " input bits=0x" << std::hex
            << std::bit_cast<uint32_t>(in[i]) << " index=" << std::dec << i;
      }
    }
  }
}

TEST_P(CastTest, NarrowF64RoundsToF32First) {
  const compression c = GetParam();
  std::mt19937_64 rng(seed() + 1);
  std::vector<double> in = {0.0, -0.0, 1e-300, -1e-300, 65504.0, 65519.999, 65520.0, 1e300, -1e300,
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(), 1.0 + 0x1p-11, 1.0 + 0x1p-11 + 0x1p-40};
  for (int i = 0; i < 100000; ++i) in.push_back(std::bit_cast<double>(rng()));
  std::uniform_real_distribution<double> u(-70000.0, 70000.0);
  for (int i = 0; i < 100000; ++i) in.push_back(u(rng));
  for (const auto& k : flavours()) {
    std::vector<uint16_t> out(in.size());
    k.narrow(out.data(), c, in.data(), dtype::f64, in.size(), 0.5f);
    for (std::size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], reference_narrow(c, float(in[i]) * 0.5f))
          << k.name << " " << name_of(c) << " input=" << in[i] << " index=" << i;
  }
}

TEST_P(CastTest, WidenEveryPatternExactlyToF32AndF64) {
  const compression c = GetParam();
  std::vector<uint16_t> in(65536 + 3);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = uint16_t(i * 40503u);  // a permutation, then 3 more
  for (const auto& k : flavours()) {
    std::vector<float> f(in.size());
    std::vector<double> d(in.size());
    k.widen(f.data(), dtype::f32, in.data(), c, in.size());
    k.widen(d.data(), dtype::f64, in.data(), c, in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const float want = reference_widen(c, in[i]);
      ASSERT_EQ(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(want)) << k.name << " h=0x" << std::hex << in[i];
      ASSERT_EQ(std::bit_cast<uint64_t>(d[i]), std::bit_cast<uint64_t>(double(want)))
          << k.name << " h=0x" << std::hex << in[i];
    }
  }
}

TEST_P(CastTest, AccumulateIsOneMultiplyAndOneAddInF32) {
  const compression c = GetParam();
  std::mt19937_64 rng(seed() + 2);
  std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{255}, std::size_t{256}, std::size_t{1027}}) {
    std::vector<float> own(n);
    std::vector<double> own64(n);
    std::vector<uint16_t> recv(n);
    for (std::size_t i = 0; i < n; ++i) {
      own[i] = u(rng);
      own64[i] = double(u(rng)) * (1.0 + 0x1p-30);
      recv[i] = reference_narrow(c, u(rng));
    }
    own[n / 2] = std::bit_cast<float>(0x00000003u);  // a subnormal
    for (const auto& k : flavours()) {
      std::vector<float> acc(n), in_place = own;
      EXPECT_FALSE(k.accumulate(acc.data(), own.data(), dtype::f32, 2.0f, recv.data(), c, n));
      EXPECT_FALSE(k.accumulate(in_place.data(), in_place.data(), dtype::f32, 2.0f, recv.data(), c, n));
      std::vector<float> acc64(n);
      EXPECT_FALSE(k.accumulate(acc64.data(), own64.data(), dtype::f64, 1.0f, recv.data(), c, n));
      for (std::size_t i = 0; i < n; ++i) {
        const float want = own[i] * 2.0f + reference_widen(c, recv[i]);
        ASSERT_EQ(std::bit_cast<uint32_t>(acc[i]), std::bit_cast<uint32_t>(want)) << k.name << " n=" << n << " i=" << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(want)) << k.name << " in place";
        const float want64 = float(own64[i]) + reference_widen(c, recv[i]);
        ASSERT_EQ(std::bit_cast<uint32_t>(acc64[i]), std::bit_cast<uint32_t>(want64)) << k.name << " f64 i=" << i;
      }
    }
  }
}

TEST_P(CastTest, NonFiniteInputsAreFlaggedWherever_TheyAre) {
  const compression c = GetParam();
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), std::bit_cast<float>(0x7f800001u)};
  for (const auto& k : flavours()) {
    for (std::size_t n : {std::size_t{1}, std::size_t{300}, std::size_t{1031}}) {
      std::vector<float> in(n, 1.5f);
      std::vector<uint16_t> out(n), recv(n, 0);
      std::vector<float> acc(n);
      EXPECT_FALSE(k.narrow(out.data(), c, in.data(), dtype::f32, n, 1.0f)) << k.name;
      EXPECT_FALSE(k.nonfinite(in.data(), dtype::f32, n)) << k.name;
      // Finite values that overflow the wire type are not the caller's non-finite values.
      in.assign(n, 1e30f);
      EXPECT_FALSE(k.narrow(out.data(), c, in.data(), dtype::f32, n, 1.0f)) << k.name;
      for (float b : bad) {
        for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
          in.assign(n, 1.5f);
          in[at] = b;
          EXPECT_TRUE(k.narrow(out.data(), c, in.data(), dtype::f32, n, 1.0f)) << k.name << " n=" << n << " at=" << at;
          EXPECT_TRUE(nonfinite(reference_widen(c, out[at])));
          EXPECT_TRUE(k.accumulate(acc.data(), in.data(), dtype::f32, 1.0f, recv.data(), c, n)) << k.name;
          EXPECT_TRUE(k.nonfinite(in.data(), dtype::f32, n)) << k.name;
          std::vector<double> d(in.begin(), in.end());
          EXPECT_TRUE(k.nonfinite(d.data(), dtype::f64, n)) << k.name;
          EXPECT_TRUE(k.narrow(out.data(), c, d.data(), dtype::f64, n, 1.0f)) << k.name;
          std::vector<uint16_t> h(n);
          for (std::size_t i = 0; i < n; ++i) h[i] = reference_narrow(c, in[i]);
          EXPECT_TRUE(k.nonfinite(h.data(), wire_dtype(c), n)) << k.name;
        }
      }
      std::vector<int32_t> ints(n, 0x7f800000);
      EXPECT_FALSE(k.nonfinite(ints.data(), dtype::i32, n)) << "integers are never non-finite";
    }
  }
}

/// Destination and source operands of `n` elements in [-1e3, 1e3], in f32 and in f64.
struct operands {
  std::vector<float> d, s;
  std::vector<double> d64, s64;
};
operands random_operands(std::mt19937_64& rng, std::size_t n) {
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  operands o{std::vector<float>(n), std::vector<float>(n), std::vector<double>(n), std::vector<double>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    o.d[i] = float(u(rng));
    o.s[i] = float(u(rng));
    o.d64[i] = u(rng);
    o.s64[i] = u(rng);
  }
  return o;
}

TEST(CastAddChecked, SumsLikeThePlainKernelAndFlagsDestinationAndSourceApart) {
  std::mt19937_64 rng(seed() + 3);
  for (const auto& k : flavours()) {
    for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{1000}}) {
      auto [d, s, d64, s64] = random_operands(rng, n);
      auto want = d;
      for (std::size_t i = 0; i < n; ++i) want[i] = d[i] + s[i];
      s[n / 2] = std::numeric_limits<float>::quiet_NaN();  // the source's NaN is not ours
      want[n / 2] = d[n / 2] + s[n / 2];
      EXPECT_EQ(k.add_checked(d.data(), s.data(), dtype::f32, n), 2u) << k.name << ": source only";
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(d[i]), std::bit_cast<uint32_t>(want[i])) << k.name << " i=" << i;
      d64[n - 1] = -std::numeric_limits<double>::infinity();
      EXPECT_EQ(k.add_checked(d64.data(), s64.data(), dtype::f64, n), 1u) << k.name << ": destination only";
      d64[0] = std::numeric_limits<double>::quiet_NaN();
      s64[0] = std::numeric_limits<double>::infinity();
      EXPECT_EQ(k.add_checked(d64.data(), s64.data(), dtype::f64, n), 3u) << k.name << ": both";
      for (std::size_t i = 0; i < n; ++i) d[i] = s[i] = 1.0f;
      EXPECT_EQ(k.add_checked(d.data(), s.data(), dtype::f32, n), 0u) << k.name << ": neither";
    }
  }
}

TEST(CastAddCheckSum, SumsLikeThePlainKernelAndFlagsAnyNonFiniteResult) {
  std::mt19937_64 rng(seed() + 4);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& k : flavours()) {
    for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{1000}}) {
      auto [d, s, d64, s64] = random_operands(rng, n);
      auto want = d;
      for (std::size_t i = 0; i < n; ++i) want[i] = d[i] + s[i];
      EXPECT_FALSE(k.add_check_sum(d.data(), s.data(), dtype::f32, n)) << k.name << ": finite";
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(d[i]), std::bit_cast<uint32_t>(want[i])) << k.name << " i=" << i;
      // Each kind of non-finite operand, in either operand, at either end; and an overflow.
      for (float bad : {nan, inf, -inf}) {
        auto d1 = d, s1 = s;
        s1[n - 1] = bad;
        EXPECT_TRUE(k.add_check_sum(d1.data(), s1.data(), dtype::f32, n)) << k.name << ": source " << bad;
        auto d2 = d, s2 = s;
        d2[0] = bad;
        EXPECT_TRUE(k.add_check_sum(d2.data(), s2.data(), dtype::f32, n)) << k.name << ": destination " << bad;
      }
      auto big = d, big_s = s;
      big[n / 2] = big_s[n / 2] = std::numeric_limits<float>::max();
      EXPECT_TRUE(k.add_check_sum(big.data(), big_s.data(), dtype::f32, n)) << k.name << ": overflow";
      EXPECT_FALSE(k.add_check_sum(d64.data(), s64.data(), dtype::f64, n)) << k.name << ": finite f64";
      s64[n / 3] = -std::numeric_limits<double>::infinity();
      EXPECT_TRUE(k.add_check_sum(d64.data(), s64.data(), dtype::f64, n)) << k.name << ": f64 -inf";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Wire, CastTest, ::testing::Values(compression::fp16, compression::bf16),
                         [](const auto& info) { return std::string(name_of(info.param)); });

TEST(CastNames, ParseAndPrint) {
  for (int i = 0; i < compression_count; ++i)
    EXPECT_EQ(parse_compression(name_of(compression(i))), compression(i));
  EXPECT_FALSE(parse_compression("fp8"));
  EXPECT_EQ(wire_dtype(compression::fp16), dtype::f16);
  EXPECT_EQ(wire_dtype(compression::bf16), dtype::bf16);
  EXPECT_FALSE(cast_kernels_name().empty());
}

}  // namespace
}  // namespace chorus
