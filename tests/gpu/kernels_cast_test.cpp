// Tests of gpu::cast (runtime/device/cuda/kernels.hpp): each direction against the host
// conversions of runtime/core/half.hpp bit for bit (a NaN must stay a NaN; its payload is the
// GPU's), at every misalignment of input and output, with guards around the output that must
// stay untouched. Argument checks run everywhere; the rest skips without a CUDA device.
#include "runtime/device/cuda/kernels.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/half.hpp"
#include "tests/gpu/kernel_fixture.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace chorus::testing;

// One cast direction on raw bits: uint32_t for f32, uint16_t for f16 and bf16.
template <class In, class Out>
struct direction {
  dtype from;
  dtype to;
  Out (*expected)(In);  // the host reference
  bool (*in_nan)(In);
  bool (*out_nan)(Out);
};

bool f32_nan(uint32_t x) { return (x & 0x7fffffffu) > 0x7f800000u; }
bool f16_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
bool bf16_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }
uint16_t host_to_f16(uint32_t x) { return f32_to_f16(std::bit_cast<float>(x)); }
uint16_t host_to_bf16(uint32_t x) { return f32_to_bf16(std::bit_cast<float>(x)); }
uint32_t host_from_f16(uint16_t h) { return std::bit_cast<uint32_t>(f16_to_f32(h)); }
uint32_t host_from_bf16(uint16_t h) { return std::bit_cast<uint32_t>(bf16_to_f32(h)); }

const direction<uint32_t, uint16_t> f32_f16{dtype::f32, dtype::f16, host_to_f16, f32_nan, f16_nan};
const direction<uint32_t, uint16_t> f32_bf16{dtype::f32, dtype::bf16, host_to_bf16, f32_nan,
                                             bf16_nan};
const direction<uint16_t, uint32_t> f16_f32{dtype::f16, dtype::f32, host_from_f16, f16_nan,
                                            f32_nan};
const direction<uint16_t, uint32_t> bf16_f32{dtype::bf16, dtype::f32, host_from_bf16, bf16_nan,
                                             f32_nan};

uint64_t seed() { return base_seed("kernels_cast_test", 20261126); }

// f32 inputs (bits): zeros, subnormals, both formats' rounding ties and overflow edges,
// extremes, infinities and NaNs, then random bit patterns and random values near f16's range.
std::vector<uint32_t> f32_inputs(std::size_t random_count) {
  std::vector<uint32_t> v = {
      0x00000000, 0x80000000,              // +0, -0
      0x00000001, 0x80000001, 0x007fffff,  // f32 subnormals: smallest, largest
      0x00400000, 0x00008000, 0x80400001,
      0x33800000, 0x33000000, 0x33000001,  // 2^-24 (smallest f16), 2^-25 (tie -> 0), above it
      0x33c00000, 0x34200000, 0xb3c00000,  // 3*2^-25 (tie -> 2*2^-24), 5*2^-25 (tie -> 4*2^-24)
      0x387fc000, 0x387fffff, 0x38800000,  // f16 subnormal/normal boundary, 2^-14
      0x3f800000, 0xbf800000, 0x3f801000,  // 1, -1, 1 + 2^-11 (f16 tie -> 1)
      0x3f803000, 0x3f801001, 0x3f808000,  // 1 + 3*2^-11 (tie -> up), above a tie, bf16 tie
      0x3f818000, 0x3f808001, 0x40490fdb,  // bf16 tie -> up, above a tie, pi
      0x477fe000, 0x477fefff, 0x477ff000,  // 65504 (f16 max), just below 65520, 65520 (-> inf)
      0xc77ff000, 0x47800000, 0x501502f9,  // -65520, 65536, 1e10
      0x7f7f0000, 0x7f7f7fff, 0x7f7f8000,  // bf16 max, below its overflow tie, the tie (-> inf)
      0x7f7fffff, 0xff7fffff,              // f32 max, -max
      0x7f800000, 0xff800000,              // +inf, -inf
      0x7fc00000, 0xffc00000, 0x7f800001,  // quiet NaN, -NaN, signalling NaN
      0x7fbfffff, 0xff800001, 0x7fffffff,  // NaN payloads
  };
  std::mt19937_64 gen(seed());
  std::uniform_real_distribution<float> near_f16(-70000.0f, 70000.0f);
  std::uniform_int_distribution<uint32_t> bits;
  for (std::size_t i = 0; i < random_count; ++i) {
    v.push_back(i % 2 == 0 ? bits(gen) : std::bit_cast<uint32_t>(near_f16(gen)));
  }
  return v;
}

// Every 16-bit pattern, `step` apart, plus three so that the count is odd.
std::vector<uint16_t> half_inputs(uint32_t step) {
  std::vector<uint16_t> v;
  for (uint32_t h = 0; h < 65536; h += step) v.push_back(uint16_t(h));
  for (uint16_t h : {uint16_t(0x0001), uint16_t(0x7c00), uint16_t(0xfe00)}) v.push_back(h);
  return v;
}

constexpr std::size_t guard = 16;      // elements after the output that must stay untouched
constexpr unsigned char fill = 0xab;  // their byte value

class gpu_cast_test : public gpu_test {
 protected:
  // Casts `input`, placed at element `in_off` of its buffer, to element `out_off` of another,
  // and compares every output element and every element around the output.
  template <class In, class Out>
  void check(const direction<In, Out>& d, const std::vector<In>& input, std::size_t in_off,
             std::size_t out_off) {
    const std::string what = std::string(name_of(d.from)) + " -> " + std::string(name_of(d.to)) +
                             " of " + std::to_string(input.size()) + " elements, input at +" +
                             std::to_string(in_off) + ", output at +" + std::to_string(out_off);
    SCOPED_TRACE(what);
    const std::size_t n = input.size();
    device_buffer in(sizeof(In) * (in_off + n + guard));
    device_buffer out(sizeof(Out) * (out_off + n + guard), fill);
    ASSERT_TRUE(in.ok()) << in.error();
    ASSERT_TRUE(out.ok()) << out.error();
    ASSERT_TRUE(in.put(input, in_off));
    const status st = gpu::cast(in.at<In>(in_off), d.from, out.at<Out>(out_off), d.to, n, stream_);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(synced());
    const std::vector<Out> got = out.all<Out>();
    Out untouched;
    std::memset(&untouched, fill, sizeof untouched);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (i < out_off || i >= out_off + n) {
        if (got[i] != untouched && ++bad <= 10) {
          ADD_FAILURE() << "element " << i << " of the output buffer, outside the output, was "
                        << "written: 0x" << std::hex << got[i];
        }
        continue;
      }
      const In x = input[i - out_off];
      const bool ok = d.in_nan(x) ? d.out_nan(got[i]) : got[i] == d.expected(x);
      if (!ok && ++bad <= 10) {
        ADD_FAILURE() << "element " << i - out_off << ": input 0x" << std::hex << x << " gave 0x"
                      << got[i] << ", expected "
                      << (d.in_nan(x) ? std::string("a NaN")
                                      : "0x" + to_hex(d.expected(x)));
      }
    }
    EXPECT_EQ(bad, 0u) << "wrong or stray elements (the first 10 are listed)";
  }

  // Every pair of misalignments 0..7 elements for input and output.
  template <class In, class Out>
  void check_offsets(const direction<In, Out>& d, const std::vector<In>& input) {
    for (std::size_t in_off = 0; in_off < 8; ++in_off) {
      for (std::size_t out_off = 0; out_off < 8; ++out_off) {
        check(d, input, in_off, out_off);
        if (HasFatalFailure()) return;
      }
    }
  }

  // Counts 0..40 (head only, head and tail, one vector, ...) at a few misalignments.
  template <class In, class Out>
  void check_small_counts(const direction<In, Out>& d, const std::vector<In>& input) {
    for (std::size_t n = 0; n <= 40; ++n) {
      const std::vector<In> part(input.begin(), input.begin() + n);
      const std::pair<std::size_t, std::size_t> offsets[] = {{0, 0}, {1, 1}, {3, 0}, {0, 5}};
      for (auto [in_off, out_off] : offsets) {
        check(d, part, in_off, out_off);
        if (HasFatalFailure()) return;
      }
    }
  }

  template <class T>
  static std::string to_hex(T v) {
    char text[16];
    std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(v));
    return text;
  }
};

TEST_F(gpu_cast_test, f32_to_f16_matches_the_host_bit_for_bit) {
  check(f32_f16, f32_inputs((1u << 21) + 1), 0, 0);
}
TEST_F(gpu_cast_test, f32_to_bf16_matches_the_host_bit_for_bit) {
  check(f32_bf16, f32_inputs((1u << 21) + 1), 0, 0);
}
TEST_F(gpu_cast_test, every_f16_pattern_widens_as_on_the_host) {
  check(f16_f32, half_inputs(1), 0, 0);
}
TEST_F(gpu_cast_test, every_bf16_pattern_widens_as_on_the_host) {
  check(bf16_f32, half_inputs(1), 0, 0);
}

TEST_F(gpu_cast_test, f32_to_f16_at_every_misalignment) {
  check_offsets(f32_f16, f32_inputs(4051));
}
TEST_F(gpu_cast_test, f32_to_bf16_at_every_misalignment) {
  check_offsets(f32_bf16, f32_inputs(4051));
}
TEST_F(gpu_cast_test, f16_to_f32_at_every_misalignment) {
  check_offsets(f16_f32, half_inputs(13));
}
TEST_F(gpu_cast_test, bf16_to_f32_at_every_misalignment) {
  check_offsets(bf16_f32, half_inputs(13));
}

TEST_F(gpu_cast_test, small_counts_in_every_direction) {
  check_small_counts(f32_f16, f32_inputs(0));
  check_small_counts(f32_bf16, f32_inputs(0));
  check_small_counts(f16_f32, half_inputs(1601));
  check_small_counts(bf16_f32, half_inputs(1601));
}

// ---- argument checks: no CUDA call is made, so these run everywhere --------------------------

TEST(gpu_cast_arguments, unsupported_pairs_name_both_dtypes) {
  const std::pair<dtype, dtype> pairs[] = {
      {dtype::f32, dtype::f64}, {dtype::f64, dtype::f32}, {dtype::f16, dtype::bf16},
      {dtype::bf16, dtype::f16}, {dtype::f32, dtype::f32}, {dtype::f16, dtype::f16},
      {dtype::i32, dtype::f32}, {dtype::f32, dtype::u8},   {dtype::i64, dtype::f16}};
  for (auto [from, to] : pairs) {
    const status st = gpu::cast(nullptr, from, nullptr, to, 0, nullptr);
    EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
    const std::string named =
        "from " + std::string(name_of(from)) + " to " + std::string(name_of(to));
    EXPECT_NE(st.message().find(named), std::string::npos) << st.message();
  }
}

TEST(gpu_cast_arguments, null_misaligned_or_overlapping_buffers_are_rejected) {
  auto* p = reinterpret_cast<void*>(std::uintptr_t(0x10000));  // never dereferenced
  auto at = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  struct bad_case {
    const void* in;
    dtype from;
    void* out;
    dtype to;
    const char* expected_words;
  };
  const bad_case cases[] = {
      {nullptr, dtype::f32, p, dtype::f16, "in is null"},
      {p, dtype::f16, nullptr, dtype::f32, "out is null"},
      {at(0x10002), dtype::f32, at(0x20000), dtype::bf16, "not aligned"},
      {at(0x10000), dtype::f32, at(0x20001), dtype::f16, "not aligned"},
      {at(0x10001), dtype::bf16, at(0x20000), dtype::f32, "not aligned"},
      {at(0x10000), dtype::f32, at(0x10008), dtype::f16, "overlap"},
      {at(0x10008), dtype::f16, at(0x10000), dtype::f32, "overlap"},
  };
  for (const bad_case& c : cases) {
    const status st = gpu::cast(c.in, c.from, c.out, c.to, 16, nullptr);
    EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
    EXPECT_NE(st.message().find(c.expected_words), std::string::npos) << st.message();
  }
}

TEST(gpu_cast_arguments, count_zero_enqueues_nothing) {
  EXPECT_TRUE(gpu::cast(nullptr, dtype::f32, nullptr, dtype::f16, 0, nullptr).ok());
  EXPECT_TRUE(gpu::cast(nullptr, dtype::bf16, nullptr, dtype::f32, 0, nullptr).ok());
}

TEST(gpu_cast_arguments, without_a_device_the_cast_fails_with_cudas_words) {
  const std::string reason = no_cuda_device_reason();
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is usable; this case needs none";
  const status st = gpu::cast(reinterpret_cast<void*>(std::uintptr_t(0x10000)), dtype::f32,
                              reinterpret_cast<void*>(std::uintptr_t(0x20000)), dtype::f16, 4,
                              nullptr);
  EXPECT_EQ(st.code(), errc::internal) << st.to_string();
  EXPECT_NE(st.message().find("gpu::cast f32 -> f16"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("failed: cuda"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace chorus
