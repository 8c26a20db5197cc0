// Reduction kernels: the per-byte hot path of allreduce. Elementwise combination of two buffers
// of one dtype under one reduce_op, and the final division of an average. No shared mutable
// state: safe to call from any number of threads on disjoint (or only read-shared) buffers.
// The loops are picked once per process: AVX2 + F16C where the CPU has them, else portable
// ones; both give identical bits. CHORUS_REDUCE_KERNELS=portable forces the portable ones.
#pragma once

#include <cstddef>

#include "runtime/core/dtype.hpp"

namespace chorus {

// Semantics shared by the kernels below (x, y: the two operands, x from dst / a, y from src / b):
// * `average` reduces exactly like `sum`; the division happens once, at the end (divide_by).
// * f16 and bf16 are widened to f32, combined in f32 and rounded back (to nearest even) once
//   per call, so a chain of calls rounds once per step, the same way on every rank.
// * f32 and f64 follow IEEE arithmetic in the default rounding mode: one combination is one
//   correctly rounded operation.
// * Float min/max: -0 counts as below +0, so min(-0,+0) = -0 and max(-0,+0) = +0 in either
//   order; if x or y is NaN the result is the canonical quiet NaN (f16 0x7e00, bf16 0x7fc0,
//   f32 0x7fc00000, f64 0x7ff8000000000000). Both are commutative bit for bit, which keeps
//   recursive-doubling partners identical.
// * band, bor and bxor are bitwise, for integer and boolean types only (a float is a broken
//   invariant).
// * Integer sum and product wrap around modulo 2^bits (u8 sum is modulo 256; i32 and i64 are
//   computed in two's complement, so signed overflow wraps instead of being undefined).
// * Pointers need no alignment at all, not even to the element size.
// * Buffers must not partially overlap: the output may be exactly an input, or disjoint from
//   it. A partial overlap, an unknown dtype/op, or a null pointer with count > 0 is a broken
//   invariant: the kernel logs the operands and aborts (checks stay on in release builds).

/// dst[i] = dst[i] (op) src[i] for i < count.
void reduce_into(void* dst, const void* src, std::size_t count, dtype t, reduce_op op);

/// out[i] = a[i] (op) b[i] for i < count. `out` may be `a`, `b` or both, so that a receiver
/// can reduce a received segment and its own data into a third buffer in one pass.
void reduce_to(void* out, const void* a, const void* b, std::size_t count, dtype t,
               reduce_op op);

/// data[i] /= divisor for i < count: the final step of `average`. divisor is the number of
/// contributions, 1..2^24 (anything else aborts; the bound keeps float(divisor) exact). Floats divide (f16/bf16 in f32, rounded once);
/// i32/i64 use C++ integer division, which truncates toward zero (-7 / 2 == -3), and u8
/// divides unsigned. The integer sum was taken modulo 2^bits, so the average of integers whose
/// sum overflowed is the wrapped sum divided.
void divide_by(void* data, std::size_t count, dtype t, int divisor);

}  // namespace chorus
