// Reduction kernels. Each call checks its arguments, dispatches once on (dtype, op) to a
// templated loop, and that loop is simple enough for the compiler to vectorise (this file is
// built with -O3): __restrict pointers, no calls or branches per element. f16/bf16 go through
// f32 in stack blocks, so the conversion loops and the combining loop each vectorise.
#include "runtime/collectives/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "runtime/core/half.hpp"
#include "runtime/core/log.hpp"

namespace chorus {
namespace {

// ---- invariant checks ---------------------------------------------------------------------

[[noreturn]] void invariant_failed(const std::string& what) {
  log::write(log::level::error, "reduce", what);
  std::abort();
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

void check_pointer(const char* fn, const char* name, const void* p, std::size_t count) {
  if (p == nullptr && count > 0)
    invariant_failed(std::string(fn) + ": " + name + " is null with count=" +
                     std::to_string(count));
}

// Equal or disjoint is fine; anything in between would read elements already overwritten.
void check_overlap(const char* fn, const char* out_name, const void* out, const char* in_name,
                   const void* in, std::size_t bytes) {
  const auto o = reinterpret_cast<std::uintptr_t>(out);
  const auto i = reinterpret_cast<std::uintptr_t>(in);
  if (o != i && o < i + bytes && i < o + bytes)
    invariant_failed(std::string(fn) + ": " + out_name + "=" + hex(out) + " partially overlaps " +
                     in_name + "=" + hex(in) + " over bytes=" + std::to_string(bytes) +
                     "; the output must be exactly an input or disjoint from it");
}

// ---- operators ----------------------------------------------------------------------------

// Integers combine in the unsigned type of the same width: wrap-around is defined there, and
// the conversion back to a signed type is modular in C++20.
template <class T, bool = std::is_integral_v<T>>
struct arithmetic { using type = T; };
template <class T>
struct arithmetic<T, true> { using type = std::make_unsigned_t<T>; };
template <class T>
using wide_unsigned = typename arithmetic<T>::type;

struct sum_op {
  template <class T>
  static T apply(T x, T y) {
    using U = wide_unsigned<T>;
    return T(U(x) + U(y));
  }
};

struct product_op {
  template <class T>
  static T apply(T x, T y) {
    using U = wide_unsigned<T>;
    return T(U(x) * U(y));
  }
};

// For floats `x != x` is the NaN test; `|` rather than `||` keeps both compares unconditional,
// so the select stays branch-free and vectorises.
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

// ---- element kinds ------------------------------------------------------------------------

// T with alignment 1: the vectoriser then never assumes element alignment (no aligned stores
// after peeling), and a misaligned buffer is still well-defined for GCC.
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

// Element types combined as themselves.
template <class T>
struct native {};

// 16-bit floats combined in f32.
struct f16_codec {
  static float load(uint16_t v) { return f16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_f16(v); }
};
struct bf16_codec {
  static float load(uint16_t v) { return bf16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_bf16(v); }
};
template <class Codec>
struct widened {};

template <class F>
void visit_dtype(const char* fn, dtype t, F&& f) {
  switch (t) {
    case dtype::f16: return f(widened<f16_codec>{});
    case dtype::bf16: return f(widened<bf16_codec>{});
    case dtype::f32: return f(native<float>{});
    case dtype::f64: return f(native<double>{});
    case dtype::i32: return f(native<int32_t>{});
    case dtype::i64: return f(native<int64_t>{});
    case dtype::u8: return f(native<uint8_t>{});
  }
  invariant_failed(std::string(fn) + ": unknown dtype value " + std::to_string(int(t)));
}

template <class F>
void visit_op(const char* fn, reduce_op op, F&& f) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average: return f(sum_op{});
    case reduce_op::min: return f(min_op{});
    case reduce_op::max: return f(max_op{});
    case reduce_op::product: return f(product_op{});
  }
  invariant_failed(std::string(fn) + ": unknown reduce_op value " + std::to_string(int(op)));
}

// ---- loops over native types --------------------------------------------------------------
// One loop per aliasing pattern, so that every pointer a loop writes through is __restrict
// truthfully. `Swap` keeps the operand order (x from a, y from b) when the output is b.

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
void reduce(native<T>, Op, void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<ua<T>*>(out);
  const auto* x = static_cast<const ua<T>*>(a);
  const auto* y = static_cast<const ua<T>*>(b);
  if (o == x && o == y) return combine_self<T, Op>(o, n);
  if (o == x) return combine_into<T, Op, false>(o, y, n);
  if (o == y) return combine_into<T, Op, true>(o, x, n);
  combine_to<T, Op>(o, x, y, n);
}

template <class T>
void divide(native<T>, void* data, std::size_t n, int divisor) {
  auto* d = static_cast<ua<T>*>(data);
  if constexpr (std::is_floating_point_v<T>) {
    const T q = T(divisor);  // exact: divisor < 2^24
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
// Blocks of 256 elements (2 KiB of f32 on the stack per operand): widen each input into a
// local array, combine, narrow into the output. Both inputs of a block are read before its
// output is written, so the output may be exactly either input without separate loops.

constexpr std::size_t block_elems = 256;

template <class Codec>
void widen(float* __restrict to, const ua<uint16_t>* __restrict from, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) to[i] = Codec::load(from[i]);
}

template <class Codec>
void narrow(ua<uint16_t>* __restrict to, const float* __restrict from, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) to[i] = Codec::store(from[i]);
}

template <class Op>
void combine_block(float* __restrict x, const float* __restrict y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = Op::apply(x[i], y[i]);
}

template <class Codec, class Op>
void reduce(widened<Codec>, Op, void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<ua<uint16_t>*>(out);
  const auto* x = static_cast<const ua<uint16_t>*>(a);
  const auto* y = static_cast<const ua<uint16_t>*>(b);
  float fx[block_elems];
  float fy[block_elems];
  for (std::size_t i = 0; i < n; i += block_elems) {
    const std::size_t m = std::min(block_elems, n - i);
    widen<Codec>(fx, x + i, m);
    widen<Codec>(fy, y + i, m);
    combine_block<Op>(fx, fy, m);
    narrow<Codec>(o + i, fx, m);
  }
}

template <class Codec>
void divide(widened<Codec>, void* data, std::size_t n, int divisor) {
  auto* d = static_cast<ua<uint16_t>*>(data);
  const float q = float(divisor);
  float f[block_elems];
  for (std::size_t i = 0; i < n; i += block_elems) {
    const std::size_t m = std::min(block_elems, n - i);
    widen<Codec>(f, d + i, m);
    for (std::size_t j = 0; j < m; ++j) f[j] = f[j] / q;
    narrow<Codec>(d + i, f, m);
  }
}

void reduce_checked(const char* fn, void* out, const void* a, const void* b, std::size_t count,
                    dtype t, reduce_op op) {
  visit_dtype(fn, t, [&](auto kind) {
    check_pointer(fn, "output", out, count);
    check_pointer(fn, "input", a, count);
    check_pointer(fn, "input", b, count);
    check_overlap(fn, "output", out, "first input", a, count * size_of(t));
    check_overlap(fn, "output", out, "second input", b, count * size_of(t));
    visit_op(fn, op, [&](auto o) {
      if (count > 0) reduce(kind, o, out, a, b, count);
    });
  });
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, dtype t, reduce_op op) {
  reduce_checked("reduce_into", dst, dst, src, count, t, op);
}

void reduce_to(void* out, const void* a, const void* b, std::size_t count, dtype t,
               reduce_op op) {
  reduce_checked("reduce_to", out, a, b, count, t, op);
}

void divide_by(void* data, std::size_t count, dtype t, int divisor) {
  visit_dtype("divide_by", t, [&](auto kind) {
    check_pointer("divide_by", "data", data, count);
    // Also keeps T(divisor) exact for f32 (< 2^24) and meaningful for u8.
    if (divisor < 1 || divisor > (1 << 24))
      invariant_failed("divide_by: divisor=" + std::to_string(divisor) + " for count=" +
                       std::to_string(count) + " dtype=" + std::string(name_of(t)) +
                       "; expected the number of contributions, 1..2^24");
    divide(kind, data, count, divisor);
  });
}

}  // namespace chorus
