// Reference reductions for the collectives' tests: every dtype and reduce_op, computed
// independently of runtime/collectives/reduce.cpp, and inputs whose float reductions are exact
// in any order (so any reduction order must give the expected bits).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "runtime/core/dtype.hpp"
#include "runtime/core/half.hpp"

namespace chorus::testing {

/// Every dtype that reduces arithmetically (bool, which reduces as logic, has tests of its own).
inline const dtype all_dtypes[] = {dtype::f16, dtype::bf16, dtype::f32, dtype::f64, dtype::i32,
                                   dtype::i64, dtype::u8,  dtype::i8,  dtype::i16};
inline const reduce_op all_ops[] = {reduce_op::sum, reduce_op::average, reduce_op::min, reduce_op::max, reduce_op::product};

inline bool is_float(dtype t) { return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32 || t == dtype::f64; }

template <class T>
T load(const std::byte* p, std::size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(std::byte* p, std::size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

inline double load_float(dtype t, const std::byte* p, std::size_t i) {
  switch (t) {
    case dtype::f16: return f16_to_f32(load<uint16_t>(p, i));
    case dtype::bf16: return bf16_to_f32(load<uint16_t>(p, i));
    case dtype::f32: return load<float>(p, i);
    default: return load<double>(p, i);
  }
}
// `v` is exact in every float type here, except an f32 quotient that the 16-bit types round.
inline void store_float(dtype t, std::byte* p, std::size_t i, double v) {
  switch (t) {
    case dtype::f16: return store<uint16_t>(p, i, f32_to_f16(static_cast<float>(v)));
    case dtype::bf16: return store<uint16_t>(p, i, f32_to_bf16(static_cast<float>(v)));
    case dtype::f32: return store<float>(p, i, static_cast<float>(v));
    default: return store<double>(p, i, v);
  }
}

// Inputs whose float reductions are exact in any order: small integers (|sum| <= 9 * 16 fits
// the 8 significant bits of bf16), and for product powers of two (and rare zeros). Integer
// types get arbitrary bits: their sum and product wrap, which is order-independent.
inline void fill_input(dtype t, reduce_op op, std::byte* p, std::size_t count, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < count; ++i) {
    switch (t) {
      case dtype::u8: store<uint8_t>(p, i, static_cast<uint8_t>(rng())); break;
      case dtype::i8: store<int8_t>(p, i, static_cast<int8_t>(rng())); break;
      case dtype::i16: store<int16_t>(p, i, static_cast<int16_t>(rng())); break;
      case dtype::i32: store<int32_t>(p, i, static_cast<int32_t>(rng())); break;
      case dtype::i64: store<int64_t>(p, i, static_cast<int64_t>(rng())); break;
      default: {
        static const int factors[] = {-2, -1, 1, 2};
        int v = op == reduce_op::product ? (rng() % 64 == 0 ? 0 : factors[rng() % 4])
                                         : static_cast<int>(rng() % 33) - 16;
        store_float(t, p, i, v);
      }
    }
  }
}

template <class T>
void integer_reference(reduce_op op, const std::vector<const std::byte*>& in, std::byte* out, std::size_t count) {
  using U = std::make_unsigned_t<T>;  // integer sum and product wrap modulo 2^bits
  const int n = static_cast<int>(in.size());
  for (std::size_t i = 0; i < count; ++i) {
    T acc = load<T>(in[0], i);
    for (int r = 1; r < n; ++r) {
      T x = load<T>(in[r], i);
      switch (op) {
        case reduce_op::sum:
        case reduce_op::average: acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(x)); break;
        case reduce_op::product: acc = static_cast<T>(static_cast<U>(acc) * static_cast<U>(x)); break;
        case reduce_op::min: acc = std::min(acc, x); break;
        case reduce_op::max: acc = std::max(acc, x); break;
      }
    }
    if (op == reduce_op::average) acc = static_cast<T>(acc / static_cast<T>(n));  // truncates toward zero
    store<T>(out, i, acc);
  }
}

inline void float_reference(dtype t, reduce_op op, const std::vector<const std::byte*>& in, std::byte* out,
                     std::size_t count) {
  const int n = static_cast<int>(in.size());
  for (std::size_t i = 0; i < count; ++i) {
    double acc = load_float(t, in[0], i);
    for (int r = 1; r < n; ++r) {
      double x = load_float(t, in[r], i);
      switch (op) {
        case reduce_op::sum:
        case reduce_op::average: acc += x; break;
        case reduce_op::product: acc *= x; break;
        case reduce_op::min: acc = std::min(acc, x); break;
        case reduce_op::max: acc = std::max(acc, x); break;
      }
    }
    if (op == reduce_op::average)  // the exact sum, divided once; 16-bit types divide in f32
      acc = t == dtype::f64 ? acc / n : static_cast<double>(static_cast<float>(acc) / static_cast<float>(n));
    store_float(t, out, i, acc);
  }
}

inline void reference(dtype t, reduce_op op, const std::vector<const std::byte*>& in, std::byte* out, std::size_t count) {
  switch (t) {
    case dtype::i32: return integer_reference<int32_t>(op, in, out, count);
    case dtype::i64: return integer_reference<int64_t>(op, in, out, count);
    case dtype::u8: return integer_reference<uint8_t>(op, in, out, count);
    case dtype::i8: return integer_reference<int8_t>(op, in, out, count);
    case dtype::i16: return integer_reference<int16_t>(op, in, out, count);
    default: return float_reference(t, op, in, out, count);
  }
}

}  // namespace chorus::testing
