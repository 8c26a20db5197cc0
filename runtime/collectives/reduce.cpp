// Reduction kernels. Each call checks its arguments, then dispatches once on (dtype, op) to a
// templated loop simple enough for the compiler to vectorise (this file is built with -O3):
// __restrict pointers, no calls or branches per element. f16/bf16 go through f32 in stack
// blocks, so the conversion loops and the combining loop each vectorise.
// The loops are compiled twice: for the baseline ISA, and for AVX2 with F16C (converting f16
// with the hardware instructions), picked once per process from CPUID. Both give identical bits.
#include "runtime/collectives/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/core/half.hpp"
#include "runtime/core/log.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CHORUS_REDUCE_X86 1
#endif

namespace chorus {
namespace {

// ---- operators ----------------------------------------------------------------------------

// Integers combine in the unsigned type of the same width: wrap-around is defined there, and
// the conversion back to a signed type is modular in C++20.
template <class T, bool = std::is_integral_v<T>>
struct arithmetic { using type = T; };
template <class T>
struct arithmetic<T, true> { using type = std::make_unsigned_t<T>; };

struct sum_op {
  template <class T>
  static T apply(T x, T y) {
    using U = typename arithmetic<T>::type;
    return T(U(x) + U(y));
  }
};

struct product_op {
  template <class T>
  static T apply(T x, T y) {
    using U = typename arithmetic<T>::type;
    return T(U(x) * U(y));
  }
};

// `x != x` is the NaN test; `|` rather than `||` keeps both compares unconditional, so the
// select stays branch-free and vectorises.
template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  return false;
}

struct min_op {
  template <class T>
  static T apply(T x, T y) {
    return ((x < y) | is_nan(x)) ? x : y;
  }
};

struct max_op {
  template <class T>
  static T apply(T x, T y) {
    return ((x > y) | is_nan(x)) ? x : y;
  }
};

// ---- unaligned element types --------------------------------------------------------------

// T with alignment 1: the vectoriser never assumes element alignment (so no aligned vector
// stores after loop peeling), and access through a misaligned pointer is defined for GCC.
template <class T>
struct unaligned;
template <>
struct unaligned<float> { typedef float type __attribute__((aligned(1))); };
template <>
struct unaligned<double> { typedef double type __attribute__((aligned(1))); };
template <>
struct unaligned<int32_t> { typedef int32_t type __attribute__((aligned(1))); };
template <>
struct unaligned<int64_t> { typedef int64_t type __attribute__((aligned(1))); };
template <>
struct unaligned<uint8_t> { typedef uint8_t type __attribute__((aligned(1))); };
template <>
struct unaligned<uint16_t> { typedef uint16_t type __attribute__((aligned(1))); };

template <class T>
using ua = typename unaligned<T>::type;
using ua16 = ua<uint16_t>;

// ---- block codecs for 16-bit floats -------------------------------------------------------
// A codec widens n stored values to f32 and narrows n f32 values back, rounding to nearest even.

struct f16_scalar {
  static float load(uint16_t v) { return f16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_f16(v); }
};
struct bf16_scalar {
  static float load(uint16_t v) { return bf16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_bf16(v); }
};

template <class Scalar, std::size_t Block>
struct portable_codec {
  static constexpr std::size_t block = Block;
  static void widen(float* __restrict to, const ua16* __restrict from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) to[i] = Scalar::load(from[i]);
  }
  static void narrow(ua16* __restrict to, const float* __restrict from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) to[i] = Scalar::store(from[i]);
  }
};

#ifdef CHORUS_REDUCE_X86
// F16C converts eight values per instruction; the portable functions (which agree bit for bit)
// take the tail.
struct f16c_codec {
  static constexpr std::size_t block = 64;
  [[gnu::target("avx2,f16c")]] static void widen(float* __restrict to,
                                                 const ua16* __restrict from, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                   reinterpret_cast<const __m128i_u*>(from + i))));
    for (; i < n; ++i) to[i] = f16_to_f32(from[i]);
  }
  [[gnu::target("avx2,f16c")]] static void narrow(ua16* __restrict to,
                                                  const float* __restrict from, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i_u*>(to + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(from + i),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) to[i] = f32_to_f16(from[i]);
  }
};
#endif

// A flavor names the two 16-bit codecs; everything else is the same source, compiled for the
// flavor's ISA.
template <class F16, class BF16>
struct flavor {
  using f16 = F16;
  using bf16 = BF16;
};
// Block lengths measured on a Xeon with AVX-512 (16 MiB sums): shorter blocks lose to loop
// overhead, longer ones to the extra trips through memory.
using portable_flavor = flavor<portable_codec<f16_scalar, 128>, portable_codec<bf16_scalar, 128>>;

// ---- loops over native types --------------------------------------------------------------
// One loop per aliasing pattern, so that every pointer a loop writes through is truthfully
// __restrict. `Swap` keeps the operand order (x from a, y from b) when the output is b.

template <class T, class Op>
void combine_to(ua<T>* __restrict out, const ua<T>* __restrict a, const ua<T>* __restrict b,
                std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = Op::apply(T(a[i]), T(b[i]));
}

template <class T, class Op, bool Swap>
void combine_into(ua<T>* __restrict dst, const ua<T>* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = Swap ? Op::apply(T(src[i]), T(dst[i])) : Op::apply(T(dst[i]), T(src[i]));
}

template <class T, class Op>
void combine_self(ua<T>* __restrict data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) data[i] = Op::apply(T(data[i]), T(data[i]));
}

template <class T, class Op>
void reduce_native(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<ua<T>*>(out);
  const auto* x = static_cast<const ua<T>*>(a);
  const auto* y = static_cast<const ua<T>*>(b);
  if (o == x && o == y) return combine_self<T, Op>(o, n);
  if (o == x) return combine_into<T, Op, false>(o, y, n);
  if (o == y) return combine_into<T, Op, true>(o, x, n);
  combine_to<T, Op>(o, x, y, n);
}

template <class T>
void divide_native(void* data, std::size_t n, int divisor) {
  auto* d = static_cast<ua<T>*>(data);
  if constexpr (std::is_floating_point_v<T>) {
    const T q = T(divisor);  // exact: divisor <= 2^24
    for (std::size_t i = 0; i < n; ++i) d[i] = d[i] / q;
  } else if constexpr (std::is_signed_v<T>) {
    const T q = T(divisor);
    for (std::size_t i = 0; i < n; ++i) d[i] = T(d[i] / q);
  } else {
    const unsigned q = unsigned(divisor);
    for (std::size_t i = 0; i < n; ++i) d[i] = T(unsigned(d[i]) / q);
  }
}

// ---- loops over 16-bit floats -------------------------------------------------------------
// Blocks of Codec::block elements: widen each input into a local f32 array, combine, narrow
// into the output. Full blocks have a constant length, so each step's loop is unrolled into
// plain vector code and small arrays stay in registers. Both inputs of a block are read before
// its output is written, so the output may be exactly either input without separate loops.

template <class Codec, class Op>
void reduce_block(ua16* out, const ua16* a, const ua16* b, std::size_t n) {
  float fx[Codec::block];
  float fy[Codec::block];
  Codec::widen(fx, a, n);
  Codec::widen(fy, b, n);
  for (std::size_t i = 0; i < n; ++i) fx[i] = Op::apply(fx[i], fy[i]);
  Codec::narrow(out, fx, n);
}

template <class Codec, class Op>
void reduce_widened(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<ua16*>(out);
  const auto* x = static_cast<const ua16*>(a);
  const auto* y = static_cast<const ua16*>(b);
  std::size_t i = 0;
  for (; i + Codec::block <= n; i += Codec::block)
    reduce_block<Codec, Op>(o + i, x + i, y + i, Codec::block);
  if (i < n) reduce_block<Codec, Op>(o + i, x + i, y + i, n - i);
}

template <class Codec>
void divide_block(ua16* data, std::size_t n, float q) {
  float f[Codec::block];
  Codec::widen(f, data, n);
  for (std::size_t i = 0; i < n; ++i) f[i] = f[i] / q;
  Codec::narrow(data, f, n);
}

template <class Codec>
void divide_widened(void* data, std::size_t n, int divisor) {
  auto* d = static_cast<ua16*>(data);
  std::size_t i = 0;
  for (; i + Codec::block <= n; i += Codec::block)
    divide_block<Codec>(d + i, Codec::block, float(divisor));
  if (i < n) divide_block<Codec>(d + i, n - i, float(divisor));
}

// ---- dispatch -----------------------------------------------------------------------------

// One validated call. dtype and op are known-good here (checked by the public functions).
struct call {
  void* out;
  const void* a;
  const void* b;
  std::size_t count;
  dtype t;
  reduce_op op;
};

template <class Flavor, class T>
void reduce_as(const call& c) {
  auto run = [&](auto op) {
    using Op = decltype(op);
    if constexpr (std::is_same_v<T, typename Flavor::f16> ||
                  std::is_same_v<T, typename Flavor::bf16>)
      reduce_widened<T, Op>(c.out, c.a, c.b, c.count);
    else
      reduce_native<T, Op>(c.out, c.a, c.b, c.count);
  };
  switch (c.op) {
    case reduce_op::sum:
    case reduce_op::average: return run(sum_op{});
    case reduce_op::min: return run(min_op{});
    case reduce_op::max: return run(max_op{});
    case reduce_op::product: return run(product_op{});
  }
}

template <class Flavor>
void reduce_flavor(const call& c) {
  switch (c.t) {
    case dtype::f16: return reduce_as<Flavor, typename Flavor::f16>(c);
    case dtype::bf16: return reduce_as<Flavor, typename Flavor::bf16>(c);
    case dtype::f32: return reduce_as<Flavor, float>(c);
    case dtype::f64: return reduce_as<Flavor, double>(c);
    case dtype::i32: return reduce_as<Flavor, int32_t>(c);
    case dtype::i64: return reduce_as<Flavor, int64_t>(c);
    case dtype::u8: return reduce_as<Flavor, uint8_t>(c);
  }
}

template <class Flavor>
void divide_flavor(void* data, std::size_t count, dtype t, int divisor) {
  switch (t) {
    case dtype::f16: return divide_widened<typename Flavor::f16>(data, count, divisor);
    case dtype::bf16: return divide_widened<typename Flavor::bf16>(data, count, divisor);
    case dtype::f32: return divide_native<float>(data, count, divisor);
    case dtype::f64: return divide_native<double>(data, count, divisor);
    case dtype::i32: return divide_native<int32_t>(data, count, divisor);
    case dtype::i64: return divide_native<int64_t>(data, count, divisor);
    case dtype::u8: return divide_native<uint8_t>(data, count, divisor);
  }
}

struct kernels {
  const char* name;
  void (*reduce)(const call&);
  void (*divide)(void*, std::size_t, dtype, int);
};

void reduce_portable(const call& c) { reduce_flavor<portable_flavor>(c); }
void divide_portable(void* d, std::size_t n, dtype t, int q) {
  divide_flavor<portable_flavor>(d, n, t, q);
}

#ifdef CHORUS_REDUCE_X86
// `flatten` inlines every loop above into these two functions, so all of them are compiled
// for AVX2 here while the baseline copies stay as they are.
using avx2_flavor = flavor<f16c_codec, portable_codec<bf16_scalar, 128>>;
[[gnu::target("avx2,f16c"), gnu::flatten]] void reduce_avx2(const call& c) {
  reduce_flavor<avx2_flavor>(c);
}
[[gnu::target("avx2,f16c"), gnu::flatten]] void divide_avx2(void* d, std::size_t n, dtype t,
                                                             int q) {
  divide_flavor<avx2_flavor>(d, n, t, q);
}
#endif

// CHORUS_REDUCE_KERNELS=portable forces the baseline loops and the portable f16 conversions
// (for debugging, and so the tests can run both); unset or "auto" picks by CPU.
kernels choose_kernels() {
  const kernels portable{"portable", reduce_portable, divide_portable};
  const char* env = std::getenv("CHORUS_REDUCE_KERNELS");
  const std::string_view want = env ? env : "auto";
  if (want == "portable") return portable;
  if (want != "auto")
    CHORUS_LOG(warn, "reduce", "CHORUS_REDUCE_KERNELS=" << want
                                   << " not understood; expected auto or portable; using auto");
#ifdef CHORUS_REDUCE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    return {"avx2+f16c", reduce_avx2, divide_avx2};
#endif
  return portable;
}

const kernels& selected_kernels() {
  static const kernels k = [] {
    const kernels chosen = choose_kernels();
    CHORUS_LOG(debug, "reduce", "kernels=" << chosen.name);
    return chosen;
  }();
  return k;
}

// ---- invariant checks ---------------------------------------------------------------------

[[noreturn]] void invariant_failed(const std::string& what) {
  log::write(log::level::error, "reduce", what);
  std::abort();
}

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

void check_kinds(const char* fn, dtype t, reduce_op op) {
  if (static_cast<int>(t) >= dtype_count)
    invariant_failed(std::string(fn) + ": unknown dtype value " + std::to_string(int(t)));
  if (static_cast<int>(op) >= reduce_op_count)
    invariant_failed(std::string(fn) + ": unknown reduce_op value " + std::to_string(int(op)));
}

void check_pointer(const char* fn, const char* name, const void* p, std::size_t count) {
  if (p == nullptr && count > 0)
    invariant_failed(std::string(fn) + ": " + name + " is null with count=" +
                     std::to_string(count));
}

// Equal or disjoint is fine; anything in between would read elements already overwritten.
void check_overlap(const char* fn, const void* out, const char* in_name, const void* in,
                   std::size_t bytes) {
  const auto o = reinterpret_cast<std::uintptr_t>(out);
  const auto i = reinterpret_cast<std::uintptr_t>(in);
  if (o != i && o < i + bytes && i < o + bytes)
    invariant_failed(std::string(fn) + ": output=" + pointer_text(out) + " partially overlaps " +
                     in_name + "=" + pointer_text(in) + " over bytes=" + std::to_string(bytes) +
                     "; the output must be exactly an input or disjoint from it");
}

void reduce_checked(const char* fn, const call& c) {
  check_kinds(fn, c.t, c.op);
  check_pointer(fn, "output", c.out, c.count);
  check_pointer(fn, "first input", c.a, c.count);
  check_pointer(fn, "second input", c.b, c.count);
  const std::size_t bytes = c.count * size_of(c.t);
  check_overlap(fn, c.out, "first input", c.a, bytes);
  check_overlap(fn, c.out, "second input", c.b, bytes);
  if (c.count > 0) selected_kernels().reduce(c);
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, dtype t, reduce_op op) {
  reduce_checked("reduce_into", {dst, dst, src, count, t, op});
}

void reduce_to(void* out, const void* a, const void* b, std::size_t count, dtype t,
               reduce_op op) {
  reduce_checked("reduce_to", {out, a, b, count, t, op});
}

void divide_by(void* data, std::size_t count, dtype t, int divisor) {
  check_kinds("divide_by", t, reduce_op::sum);
  check_pointer("divide_by", "data", data, count);
  // The upper bound keeps float(divisor) exact; an average never has more contributions.
  if (divisor < 1 || divisor > (1 << 24))
    invariant_failed("divide_by: divisor=" + std::to_string(divisor) +
                     " dtype=" + std::string(name_of(t)) + " count=" + std::to_string(count) +
                     "; expected the number of contributions, 1..2^24");
  if (count > 0) selected_kernels().divide(data, count, t, divisor);
}

}  // namespace chorus
