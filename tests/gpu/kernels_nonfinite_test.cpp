// Tests of gpu::count_nonfinite (runtime/device/cuda/kernels.hpp) for f16, bf16, f32 and f64
// against a host count with std::isfinite: no, one (first, last), many and only non-finite
// elements, at misalignments 0..7, counts 0 and 1, 10M+3 elements, and a counter that
// accumulates. Argument checks run everywhere; the rest skips without a CUDA device.
#include "runtime/device/cuda/kernels.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/half.hpp"
#include "tests/gpu/kernel_fixture.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace chorus::testing;
using counter_t = unsigned long long;

// A floating-point dtype on raw bits E (uint16_t, uint32_t or uint64_t).
template <class E>
struct float_kind {
  dtype t;
  E exponent;                // the exponent field's mask
  bool (*host_nonfinite)(E);  // the reference, through the C++ float types
};

bool f16_nonfinite(uint16_t h) { return !std::isfinite(f16_to_f32(h)); }
bool bf16_nonfinite(uint16_t h) { return !std::isfinite(bf16_to_f32(h)); }
bool f32_nonfinite(uint32_t x) { return !std::isfinite(std::bit_cast<float>(x)); }
bool f64_nonfinite(uint64_t x) { return !std::isfinite(std::bit_cast<double>(x)); }

const float_kind<uint16_t> f16_kind{dtype::f16, 0x7c00, f16_nonfinite};
const float_kind<uint16_t> bf16_kind{dtype::bf16, 0x7f80, bf16_nonfinite};
const float_kind<uint32_t> f32_kind{dtype::f32, 0x7f800000u, f32_nonfinite};
const float_kind<uint64_t> f64_kind{dtype::f64, 0x7ff0000000000000ull, f64_nonfinite};

uint64_t seed() { return base_seed("kernels_nonfinite_test", 20261126); }

template <class E>
constexpr E sign_bit() {
  return E(E(1) << (8 * sizeof(E) - 1));
}
template <class E>
constexpr E lowest_exponent_bit(E exponent) {
  return E(exponent & E(~exponent + 1));
}

// +-inf, quiet and signalling NaNs of both signs, the largest payload.
template <class E>
std::vector<E> nonfinite_values(const float_kind<E>& k) {
  const E s = sign_bit<E>(), m = k.exponent, low = lowest_exponent_bit(m);
  return {m, E(s | m), E(m | (low >> 1)), E(s | m | (low >> 1)), E(m | 1), E(s | m | 1),
          E(m | (low - 1))};
}

// `n` finite values: zeros, subnormals, the largest finite of both signs, the smallest normal,
// then random finite bit patterns (a pattern with an all-ones exponent loses the exponent's
// top bit, which for every format here is the word's second-highest bit).
template <class E>
std::vector<E> finite_values(const float_kind<E>& k, std::size_t n, std::mt19937_64& gen) {
  const E s = sign_bit<E>(), m = k.exponent, low = lowest_exponent_bit(m);
  std::vector<E> v = {0, s, 1, E(s | 1), E(low - 1), E(m - 1), E(s | (m - 1)), low};
  std::uniform_int_distribution<uint64_t> bits;
  while (v.size() < n) {
    E e = E(bits(gen));
    if (k.host_nonfinite(e)) e = E(e & E(~E(s >> 1)));
    v.push_back(e);
  }
  v.resize(n);
  for (E e : v) EXPECT_FALSE(k.host_nonfinite(e)) << "test bug: a finite value is not finite";
  return v;
}

class gpu_nonfinite_test : public gpu_test {
 protected:
  // The device's count for `data` placed at element `offset`, added to a counter that starts
  // at `start`; ~0 (after a reported failure) when a CUDA call failed.
  template <class E>
  counter_t device_count(const float_kind<E>& k, const std::vector<E>& data, std::size_t offset,
                         counter_t start) {
    device_buffer buf(sizeof(E) * (offset + data.size() + 1));
    device_buffer counter(sizeof(counter_t));
    if (!buf.ok() || !counter.ok()) {
      ADD_FAILURE() << "cudaMalloc: " << (buf.ok() ? counter.error() : buf.error());
      return ~counter_t(0);
    }
    if (!buf.put(data, offset) || !counter.put(std::vector<counter_t>{start}, 0)) {
      ADD_FAILURE() << "cudaMemcpy host -> device failed";
      return ~counter_t(0);
    }
    const status st = gpu::count_nonfinite(buf.at<E>(offset), k.t, data.size(),
                                           counter.at<counter_t>(0), stream_);
    if (!st.ok()) {
      ADD_FAILURE() << st.to_string();
      return ~counter_t(0);
    }
    if (::testing::AssertionResult r = synced(); !r) {
      ADD_FAILURE() << r.message();
      return ~counter_t(0);
    }
    return counter.all<counter_t>()[0];
  }

  template <class E>
  void expect_count(const float_kind<E>& k, const std::vector<E>& data, std::size_t offset,
                    counter_t start = 0) {
    const auto host = counter_t(std::count_if(data.begin(), data.end(), k.host_nonfinite));
    EXPECT_EQ(device_count(k, data, offset, start), start + host)
        << name_of(k.t) << ": " << data.size() << " elements at offset " << offset
        << ", counter starting at " << start;
  }

  // The crafted cases of one dtype, each at misalignments 0..7.
  template <class E>
  void check_kind(const float_kind<E>& k) {
    SCOPED_TRACE(std::string(name_of(k.t)));
    std::mt19937_64 gen(seed() + uint64_t(k.t));
    const std::vector<E> finite = finite_values(k, 1003, gen);
    const std::vector<E> bad = nonfinite_values(k);
    for (std::size_t off = 0; off < 8; ++off) {
      expect_count(k, finite, off);  // none
      std::vector<E> v = finite;
      v.front() = bad[0];  // one at the start
      expect_count(k, v, off);
      v = finite;
      v.back() = bad[2];  // one at the end
      expect_count(k, v, off);
      v = finite;
      for (std::size_t i = 0; i < v.size(); i += 3) v[i] = bad[(i / 3) % bad.size()];  // many
      expect_count(k, v, off, 1000);  // and the counter accumulates
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = bad[i % bad.size()];  // only
      expect_count(k, v, off);
      expect_count(k, std::vector<E>{finite[5]}, off);  // count 1
      expect_count(k, std::vector<E>{bad[off % bad.size()]}, off);
      expect_count(k, std::vector<E>{}, off, 7);  // count 0: the counter stays
      for (std::size_t n = 2; n <= 40; ++n) {     // head/body/tail combinations
        std::vector<E> w(finite.begin(), finite.begin() + n);
        w[n / 2] = bad[n % bad.size()];
        w[n - 1] = bad[(n + 1) % bad.size()];
        expect_count(k, w, off);
      }
    }
  }

  // 10M+3 elements with non-finite values scattered, then all non-finite.
  template <class E>
  void check_large(const float_kind<E>& k) {
    SCOPED_TRACE(std::string(name_of(k.t)));
    const std::size_t n = 10'000'003;
    const std::vector<E> bad = nonfinite_values(k);
    std::vector<E> v(n, E(k.exponent >> 1));  // a plain finite value
    for (std::size_t i : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(8),
                          std::size_t(4096), std::size_t(5'000'001), n - 2, n - 1}) {
      v[i] = bad[i % bad.size()];
    }
    for (std::size_t i = 999'983; i < n; i += 999'983) v[i] = bad[i % bad.size()];
    expect_count(k, v, 0);
    expect_count(k, v, 3);
    std::fill(v.begin(), v.end(), bad[1]);
    expect_count(k, v, 1);
  }
};

TEST_F(gpu_nonfinite_test, f16_crafted_inputs) { check_kind(f16_kind); }
TEST_F(gpu_nonfinite_test, bf16_crafted_inputs) { check_kind(bf16_kind); }
TEST_F(gpu_nonfinite_test, f32_crafted_inputs) { check_kind(f32_kind); }
TEST_F(gpu_nonfinite_test, f64_crafted_inputs) { check_kind(f64_kind); }
TEST_F(gpu_nonfinite_test, f16_ten_million_and_three) { check_large(f16_kind); }
TEST_F(gpu_nonfinite_test, bf16_ten_million_and_three) { check_large(bf16_kind); }
TEST_F(gpu_nonfinite_test, f32_ten_million_and_three) { check_large(f32_kind); }
TEST_F(gpu_nonfinite_test, f64_ten_million_and_three) { check_large(f64_kind); }

TEST_F(gpu_nonfinite_test, integer_dtypes_leave_the_counter_alone) {
  const std::vector<uint32_t> nan_bits(1001, 0x7fc00000u);  // NaN if it were f32
  device_buffer buf(sizeof(uint32_t) * nan_bits.size());
  device_buffer counter(sizeof(counter_t));
  ASSERT_TRUE(buf.ok() && counter.ok());
  ASSERT_TRUE(buf.put(nan_bits, 0) && counter.put(std::vector<counter_t>{3}, 0));
  for (dtype t : {dtype::i32, dtype::i64, dtype::u8}) {
    const status st =
        gpu::count_nonfinite(buf.at<uint32_t>(0), t, 500, counter.at<counter_t>(0), stream_);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  ASSERT_TRUE(synced());
  EXPECT_EQ(counter.all<counter_t>()[0], 3u);
}

// ---- argument checks: no CUDA call is made, so these run everywhere --------------------------

TEST(gpu_nonfinite_arguments, bad_buffers_and_dtypes_are_rejected) {
  auto at = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  auto* counter = static_cast<counter_t*>(at(0x20000));  // never dereferenced
  struct bad_case {
    const void* data;
    dtype t;
    counter_t* counter;
    const char* expected_words;
  };
  const bad_case cases[] = {
      {nullptr, dtype::f32, counter, "data is null"},
      {at(0x10000), dtype::f16, nullptr, "counter is null"},
      {at(0x10002), dtype::f32, counter, "not aligned"},
      {at(0x10001), dtype::bf16, counter, "not aligned"},
      {at(0x10004), dtype::f64, counter, "not aligned"},
      {at(0x10000), dtype::f32, static_cast<counter_t*>(at(0x20004)), "not aligned"},
      {at(0x10000), static_cast<dtype>(42), counter, "unknown dtype 42"},
  };
  for (const bad_case& c : cases) {
    const status st = gpu::count_nonfinite(c.data, c.t, 16, c.counter, nullptr);
    EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
    EXPECT_NE(st.message().find(c.expected_words), std::string::npos) << st.message();
  }
}

TEST(gpu_nonfinite_arguments, count_zero_and_integers_enqueue_nothing) {
  for (dtype t : {dtype::f16, dtype::bf16, dtype::f32, dtype::f64, dtype::i32, dtype::i64,
                  dtype::u8}) {
    EXPECT_TRUE(gpu::count_nonfinite(nullptr, t, 0, nullptr, nullptr).ok()) << name_of(t);
  }
  EXPECT_TRUE(gpu::count_nonfinite(nullptr, dtype::i32, 100, nullptr, nullptr).ok());
}

TEST(gpu_nonfinite_arguments, without_a_device_the_count_fails_with_cudas_words) {
  const std::string reason = no_cuda_device_reason();
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is usable; this case needs none";
  const status st = gpu::count_nonfinite(reinterpret_cast<void*>(std::uintptr_t(0x10000)),
                                         dtype::f32, 4,
                                         reinterpret_cast<counter_t*>(std::uintptr_t(0x20000)),
                                         nullptr);
  EXPECT_EQ(st.code(), errc::internal) << st.to_string();
  EXPECT_NE(st.message().find("gpu::count_nonfinite of 4 f32 elements"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("failed: cuda"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace chorus
