// Conversions between f32 and the two 16-bit float formats Chorus reduces: IEEE binary16 (f16)
// and bfloat16 (bf16), both stored as raw uint16_t words. Portable, branch-free bit manipulation
// (no tables, no intrinsics), so that a loop over an array of them vectorises.
// Rounding is to nearest, ties to even, assuming the default floating-point environment.
// The f16 functions agree bit for bit with the x86 F16C instructions (NaNs included), which the
// reduction kernels use instead where the CPU has them; these are the portable reference.
#pragma once

#include <bit>
#include <cstdint>

namespace chorus {
namespace half_detail {

// c ? a : b as mask arithmetic. A plain ?: lets GCC turn the select back into a branch around
// the float add or multiply feeding it, and a branch (or a possibly trapping float op under
// one) stops the loop vectoriser; masks keep every operation unconditional.
inline uint32_t select(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - uint32_t(c);
  return (a & m) | (b & ~m);
}

}  // namespace half_detail

/// binary16 -> f32. Exact: every f16 value, subnormals included, is an f32 value.
/// Infinities stay infinite; a NaN becomes a quiet NaN with its sign and its payload shifted
/// into the top of f32's (bit for bit what the x86 F16C instruction produces).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7fffu;
  const int32_t smag = int32_t(mag);
  // Normal numbers: move exponent and mantissa into place and rebias the exponent 15 -> 127.
  const uint32_t normal = (mag << 13) + (112u << 23);
  // Infinity and NaN: exponent all ones in and out, mantissa (the NaN payload) shifted along,
  // and a NaN comes out quiet (as from the F16C instruction, so both paths agree bit for bit).
  const uint32_t quiet = half_detail::select(smag > 0x7c00, 0x00400000u, 0u);
  const uint32_t special = (mag << 13) | 0x7f800000u | quiet;
  // Zero and subnormals: the value is mantissa * 2^-24, computed exactly in f32.
  const uint32_t tiny = std::bit_cast<uint32_t>(float(smag) * 0x1p-24f);
  uint32_t bits = half_detail::select(smag >= 0x7c00, special, normal);
  bits = half_detail::select(smag < 0x0400, tiny, bits);
  return std::bit_cast<float>(bits | sign);
}

/// f32 -> binary16, round to nearest even. Magnitudes from 65520 (halfway between the largest
/// f16, 65504, and 2^16; the tie goes to the even neighbour, which is infinity) round to infinity;
/// magnitudes below 2^-14 become subnormals or zero. A NaN becomes a quiet NaN with the top ten
/// bits of its payload and its sign (what the x86 F16C instructions produce).
inline uint16_t f32_to_f16(float f) {
  // Every candidate is built as "f16 bits << 13", aligned with the f32 fields, and shifted
  // down once at the end. (Selecting among already-narrowed values made GCC narrow each
  // candidate separately, which costs more than the arithmetic itself.)
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t mag = x & 0x7fffffffu;
  const int32_t smag = int32_t(mag);  // below 2^31: signed compares, which SSE2 has
  // Normal range [2^-14, 65520): rebias the exponent 127 -> 15, then add just under half an
  // f16 ulp, plus one when the lowest kept bit is odd, so that ties round to even. A carry out
  // of the mantissa correctly bumps the exponent. (Wraps for small inputs; discarded below.)
  const uint32_t normal = mag - (112u << 23) + 0x0fffu + ((mag >> 13) & 1u);
  // Below 2^-14: in |f| + 0.5f the f16 subnormal spacing (2^-24) is exactly one f32 ulp, so the
  // FPU's own round-to-nearest-even does the rounding; subtracting 0.5f's bits leaves the f16
  // mantissa, 0x400 when it rounds up to the smallest normal (whose encoding is 0x400 too).
  const uint32_t tiny =
      (std::bit_cast<uint32_t>(std::bit_cast<float>(mag) + 0.5f) - 0x3f000000u) << 13;
  const uint32_t inf = 0x7c00u << 13;
  const uint32_t nan = (0x7e00u << 13) | (mag & (0x03ffu << 13));
  uint32_t h = half_detail::select(smag < 0x38800000, tiny, normal);
  h = half_detail::select(smag >= 0x477ff000, inf, h);
  h = half_detail::select(smag > 0x7f800000, nan, h);
  const uint32_t sign = (x >> 3) & (0x8000u << 13);
  return uint16_t((h | sign) >> 13);
}

/// bfloat16 -> f32. Exact: bf16 is the top half of an f32.
inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

/// f32 -> bfloat16, round to nearest even. Finite values past the largest bf16 round to
/// infinity through the carry into the exponent; f32 subnormals round like any other value.
/// A NaN stays a NaN (the quiet bit is set, so truncating its payload cannot make it infinite).
inline uint16_t f32_to_bf16(float f) {
  // Select before the final shift, as in f32_to_f16, so that a loop narrows only once.
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  const uint32_t nan = x | 0x00400000u;
  return uint16_t(half_detail::select(int32_t(x & 0x7fffffffu) > 0x7f800000, nan, rounded) >> 16);
}

}  // namespace chorus
