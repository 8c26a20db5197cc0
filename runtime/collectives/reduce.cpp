// Reduction kernels. Each call checks its arguments, then dispatches once on (dtype, op) to a
// templated loop simple enough for the compiler to vectorise (this file is built with -O3):
// __restrict pointers, no calls or branches per element. f16/bf16 go through f32 in stack
// blocks, so the conversion loops and the combining loop each vectorise.
// The loops are compiled twice, for the baseline ISA and for AVX2 with F16C (which converts f16
// in hardware); one is picked per process from CPUID. Both give identical bits: the portable
// f16 conversions match F16C exactly, and the rest is the same source without FMA contraction.
#include "runtime/collectives/reduce.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/core/kernel_build.hpp"
#include "runtime/core/half.hpp"
#include "runtime/core/cpu_features.hpp"
#include "runtime/core/log.hpp"
#include "runtime/compression/f16_codec.hpp"

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

// Bitwise ops: integer types only (dispatch refuses them for floats).
struct band_op {
  template <class T>
  static T apply(T x, T y) { return T(x & y); }
};
struct bor_op {
  template <class T>
  static T apply(T x, T y) { return T(x | y); }
};
struct bxor_op {
  template <class T>
  static T apply(T x, T y) { return T(x ^ y); }
};

// Float min and max are commutative bit for bit, so that two ranks combining the same pair in
// opposite orders (recursive doubling: a rank computes op(mine, theirs), its partner
// op(theirs, mine)) end with identical bits:
// * neither operand NaN: the smaller (larger) value, with -0 below +0, so min(-0, +0) = -0 and
//   max(-0, +0) = +0 whichever comes first (as IEEE 754-2019 minimum and maximum order them);
// * either operand NaN: the default quiet NaN (positive, payload 0: f32 0x7fc00000, f64
//   0x7ff8000000000000; f16 and bf16, combined in f32, store it as 0x7e00 and 0x7fc0).
// The result depends only on the two values, never on their order, so min and max are also
// associative: any combination tree gives the same bits.
//
// Branch-free and vectorisable, about as cheap as a plain select. min(x, y) <= x, so when x's
// sign bit is set (x negative or -0) the minimum's is set too: OR-ing x's sign bit into
// `x < y ? x : y` changes nothing except where that select is wrong, the tie x = -0, y = +0
// (it gives y). When x's sign bit is clear the select is right as it is. Max mirrors it: when
// x's sign bit is clear, clearing the result's fixes the tie x = +0, y = -0. One unordered
// compare then puts the canonical NaN wherever an operand is NaN.
template <class T>
using float_bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <bool Max, class T>
T float_min_max(T x, T y) {
  using U = float_bits<T>;
  constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  constexpr U nan = sizeof(U) == 4 ? U(0x7fc00000u) : U(0x7ff8000000000000ull);
  const U xb = std::bit_cast<U>(x);
  const U pick = std::bit_cast<U>(Max ? (x > y ? x : y) : (x < y ? x : y));  // y on a tie
  const U ordered = Max ? pick & (xb | ~sign) : pick | (xb & sign);
  const U unordered = U(0) - U(std::isunordered(x, y));  // all ones if x or y is NaN
  return std::bit_cast<T>((ordered & ~unordered) | (nan & unordered));
}

struct min_op {
  template <class T>
  static T apply(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return float_min_max<false>(x, y);
    return x < y ? x : y;
  }
};

struct max_op {
  template <class T>
  static T apply(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) return float_min_max<true>(x, y);
    return x > y ? x : y;
  }
};

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

// Element i of the block is f32 i.
template <class Scalar, std::size_t Block>
struct sequential_codec {
  static constexpr std::size_t block = Block;
  static void widen(float* __restrict to, const byte* __restrict from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) to[i] = Scalar::load(load<uint16_t>(from + 2 * i));
  }
  static void narrow(byte* __restrict to, const float* __restrict from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) store<uint16_t>(to + 2 * i, Scalar::store(from[i]));
  }
};

// Each 32-bit word holds two elements: its low halves go to the first half of the f32 block,
// its high halves to the second, so widening and narrowing are 32-bit lane operations without
// lane shuffles (for bf16 about 1.4x faster than sequential). Combining is elementwise and both
// inputs share the layout, so only narrow has to undo it.
template <class Scalar, std::size_t Block>
struct paired_codec {
  static constexpr std::size_t block = Block;
  static void widen(float* __restrict to, const byte* __restrict from, std::size_t n) {
    const std::size_t pairs = n / 2;
    for (std::size_t i = 0; i < pairs; ++i) {
      const uint32_t w = load<uint32_t>(from + 4 * i);
      to[i] = Scalar::load(uint16_t(w));
      to[pairs + i] = Scalar::load(uint16_t(w >> 16));
    }
    if (n % 2) to[n - 1] = Scalar::load(load<uint16_t>(from + 2 * (n - 1)));
  }
  static void narrow(byte* __restrict to, const float* __restrict from, std::size_t n) {
    const std::size_t pairs = n / 2;
    for (std::size_t i = 0; i < pairs; ++i)
      store<uint32_t>(to + 4 * i, uint32_t(Scalar::store(from[i])) |
                                      uint32_t(Scalar::store(from[pairs + i])) << 16);
    if (n % 2) store<uint16_t>(to + 2 * (n - 1), Scalar::store(from[n - 1]));
  }
};

// Block lengths (elements) were measured with 16 MiB sums on a Xeon: shorter blocks lose to
// loop overhead, longer ones to spilling out of L1 between the steps of a block.
using bf16_codec = paired_codec<bf16_scalar, 128>;
using portable_flavor = flavor<sequential_codec<f16_scalar, 128>, bf16_codec>;

// ---- loops over native types --------------------------------------------------------------
// One loop per aliasing pattern, so that every pointer a loop writes through is truthfully
// __restrict. `Swap` keeps the operand order (x from a, y from b) when the output is b.

template <class T, class Op>
void combine_to(byte* __restrict out, const byte* __restrict a, const byte* __restrict b,
                std::size_t n) {
  constexpr std::size_t w = sizeof(T);
  for (std::size_t i = 0; i < n; ++i)
    store<T>(out + i * w, Op::apply(load<T>(a + i * w), load<T>(b + i * w)));
}

template <class T, class Op, bool Swap>
void combine_into(byte* __restrict dst, const byte* __restrict src, std::size_t n) {
  constexpr std::size_t w = sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    const T d = load<T>(dst + i * w), s = load<T>(src + i * w);
    store<T>(dst + i * w, Swap ? Op::apply(s, d) : Op::apply(d, s));
  }
}

template <class T, class Op>
void combine_self(byte* __restrict data, std::size_t n) {
  constexpr std::size_t w = sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    const T d = load<T>(data + i * w);
    store<T>(data + i * w, Op::apply(d, d));
  }
}

template <class T, class Op>
void reduce_native(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<byte*>(out);
  const auto* x = static_cast<const byte*>(a);
  const auto* y = static_cast<const byte*>(b);
  if (o == x && o == y) return combine_self<T, Op>(o, n);
  if (o == x) return combine_into<T, Op, false>(o, y, n);
  if (o == y) return combine_into<T, Op, true>(o, x, n);
  combine_to<T, Op>(o, x, y, n);
}

// Floats divide (T(divisor) is exact: divisor <= 2^24); signed integers truncate toward zero;
// integers narrower than int divide in int (u8: unsigned), so that a divisor beyond their
// range gives 0 rather than a wrapped divisor.
template <class T>
void divide_native(void* data, std::size_t n, int divisor) {
  auto* d = static_cast<byte*>(data);
  constexpr std::size_t w = sizeof(T);
  using Q = std::conditional_t<std::is_same_v<T, uint8_t>, unsigned,
                               std::conditional_t<(std::is_integral_v<T> && sizeof(T) < sizeof(int)), int, T>>;
  const Q q = Q(divisor);
  for (std::size_t i = 0; i < n; ++i) store<T>(d + i * w, T(Q(load<T>(d + i * w)) / q));
}

// ---- loops over 16-bit floats -------------------------------------------------------------
// Blocks of Codec::block elements: widen each input into a local f32 array, combine, narrow
// into the output. Full blocks have a constant length, so each step's loop is unrolled into
// plain vector code and small arrays stay in registers. Both inputs of a block are read before
// its output is written, so the output may be exactly either input without separate loops.

template <class Codec, class Op>
void reduce_block(byte* out, const byte* a, const byte* b, std::size_t n) {
  float fx[Codec::block];
  float fy[Codec::block];
  Codec::widen(fx, a, n);
  Codec::widen(fy, b, n);
  for (std::size_t i = 0; i < n; ++i) fx[i] = Op::apply(fx[i], fy[i]);
  Codec::narrow(out, fx, n);
}

template <class Codec, class Op>
void reduce_widened(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<byte*>(out);
  const auto* x = static_cast<const byte*>(a);
  const auto* y = static_cast<const byte*>(b);
  std::size_t i = 0;
  for (; i + Codec::block <= n; i += Codec::block)
    reduce_block<Codec, Op>(o + 2 * i, x + 2 * i, y + 2 * i, Codec::block);
  if (i < n) reduce_block<Codec, Op>(o + 2 * i, x + 2 * i, y + 2 * i, n - i);
}

template <class Codec>
void divide_block(byte* data, std::size_t n, float q) {
  float f[Codec::block];
  Codec::widen(f, data, n);
  for (std::size_t i = 0; i < n; ++i) f[i] = f[i] / q;
  Codec::narrow(data, f, n);
}

template <class Codec>
void divide_widened(void* data, std::size_t n, int divisor) {
  auto* d = static_cast<byte*>(data);
  std::size_t i = 0;
  for (; i + Codec::block <= n; i += Codec::block)
    divide_block<Codec>(d + 2 * i, Codec::block, float(divisor));
  if (i < n) divide_block<Codec>(d + 2 * i, n - i, float(divisor));
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
    case reduce_op::band:
    case reduce_op::bor:
    case reduce_op::bxor:
      if constexpr (std::is_integral_v<T>) {
        if (c.op == reduce_op::band) return run(band_op{});
        if (c.op == reduce_op::bor) return run(bor_op{});
        return run(bxor_op{});
      }
      return;  // floats: refused in reduce_checked
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
    case dtype::i8: return reduce_as<Flavor, int8_t>(c);
    case dtype::i16: return reduce_as<Flavor, int16_t>(c);
    case dtype::boolean: {
      // 0/1 bytes: "or" is max, "and" is min, "exclusive or" bitwise (average never reaches
      // here: refused at submit).
      call logic = c;
      if (c.op != reduce_op::bxor)
        logic.op = c.op == reduce_op::min || c.op == reduce_op::product || c.op == reduce_op::band ? reduce_op::min
                                                                                                    : reduce_op::max;
      return reduce_as<Flavor, uint8_t>(logic);
    }
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
    case dtype::i8: return divide_native<int8_t>(data, count, divisor);
    case dtype::i16: return divide_native<int16_t>(data, count, divisor);
    case dtype::boolean: return;  // no average of booleans (refused at submit)
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
using avx2_flavor = flavor<f16c_codec, bf16_codec>;
[[gnu::target("avx2,f16c"), gnu::flatten]] void reduce_avx2(const call& c) {
  reduce_flavor<avx2_flavor>(c);
}
[[gnu::target("avx2,f16c"), gnu::flatten]] void divide_avx2(void* d, std::size_t n, dtype t,
                                                             int q) {
  divide_flavor<avx2_flavor>(d, n, t, q);
}
#endif

// The baseline loops and the portable f16 conversions, or the AVX2 + F16C build where the CPU
// has it and runtime/config did not ask for the portable one (CHORUS_REDUCE_KERNELS=portable).
const kernels& selected_kernels() {
  static const kernels portable{"portable", reduce_portable, divide_portable};
#ifdef CHORUS_REDUCE_X86
  static const kernels avx2{"avx2+f16c", reduce_avx2, divide_avx2};
  static const bool has_avx2 = cpu_has_avx2_f16c();
  if (has_avx2 && !portable_kernels_forced()) return avx2;
#endif
  return portable;
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

void check_dtype(const char* fn, dtype t) {
  if (static_cast<int>(t) >= dtype_count)
    invariant_failed(std::string(fn) + ": unknown dtype value " + std::to_string(int(t)));
}

void check_op(const char* fn, reduce_op op) {
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
  check_dtype(fn, c.t);
  check_op(fn, c.op);
  if (is_bitwise(c.op) && !is_integral(c.t))
    invariant_failed(std::string(fn) + ": " + std::string(name_of(c.op)) + " of " + std::string(name_of(c.t)) +
                     "; bitwise ops take integer and boolean types only");
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
  check_dtype("divide_by", t);
  check_pointer("divide_by", "data", data, count);
  // The upper bound keeps float(divisor) exact; an average never has more contributions.
  if (divisor < 1 || divisor > (1 << 24))
    invariant_failed("divide_by: divisor=" + std::to_string(divisor) +
                     " dtype=" + std::string(name_of(t)) + " count=" + std::to_string(count) +
                     "; expected the number of contributions, 1..2^24");
  if (count > 0) selected_kernels().divide(data, count, t, divisor);
}

}  // namespace chorus
