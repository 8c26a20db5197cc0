// Casts between the caller's floats (f32, f64) and the 16-bit wire formats of compression
// (fp16 = IEEE binary16, bf16 = bfloat16), and the NaN/Inf scan: the per-byte work of compressed
// collectives. Each cast can fuse a prescale and the NaN/Inf check of its input, so that the
// data makes one pass. Stateless: safe from any thread on disjoint (or read-shared) buffers.
// The loops are picked once per process, as the reduce kernels (reduce.hpp): AVX-512 or
// AVX2 + F16C where the CPU has them, else portable ones; every flavour gives identical bits
// (rounding to nearest even, NaN and Inf kept, subnormals exact). CHORUS_REDUCE_KERNELS=portable
// forces the portable ones here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/compression/options.hpp"
#include "runtime/core/dtype.hpp"

namespace chorus {

/// The element type on the wire: f16 or bf16 (none: not a wire type, returns f32).
dtype wire_dtype(compression c);
/// Whether `t` may be compressed: f32 and f64.
inline bool compressible(dtype t) { return t == dtype::f32 || t == dtype::f64; }

// Semantics shared by the functions below. `src`/`dst` is f32 or f64; `c` is fp16 or bf16
// (anything else, or a null pointer with n > 0, is a broken invariant that logs and aborts).
// f64 values are first rounded to f32 (the accumulators are f32), then to the wire type.
// Scaling multiplies in f32 after that rounding. Pointers need no alignment.

/// to[i] = wire(f32(from[i]) * scale). Returns whether any from[i] was NaN or +-Inf (checked
/// before scaling).
bool narrow_to_wire(void* to, compression c, const void* from, dtype src, std::size_t n, float scale = 1.0f);

/// to[i] = from[i] widened (exactly) to `dst`.
void widen_from_wire(void* to, dtype dst, const void* from, compression c, std::size_t n);

/// acc[i] = f32(own[i]) * scale + f32(recv[i]) (one f32 multiply, one f32 add). `acc` may be
/// `own` when src is f32. Returns whether any own[i] was NaN or +-Inf.
bool accumulate_wire(float* acc, const void* own, dtype src, float scale, const void* recv, compression c,
                     std::size_t n);

/// dst[i] = dst[i] + src[i] for f32 or f64 (the same bits as reduce_into's sum), returning
/// whether any dst[i] was NaN or +-Inf before: the plain ring's NaN/Inf check, fused into the
/// reduction it does anyway.
bool add_checked(void* dst, const void* src, dtype t, std::size_t n);
/// add_checked, also checking the source: bit 0 set when a dst[i] was NaN/+-Inf before, bit 1
/// when a src[i] was (the plain ring's step 0, whose source is the left neighbour's own input).
uint32_t add_checked_both(void* dst, const void* src, dtype t, std::size_t n);

/// dst[i] = dst[i] + src[i] for f32 or f64 (the same bits as reduce_into's sum), returning
/// whether any dst[i] is NaN or +-Inf afterwards. A sum is non-finite wherever an operand was
/// (and where it overflowed), so one check of the result finds every non-finite operand of a
/// chain of additions, at almost no cost over the addition; who held it needs a scan after.
bool add_check_sum(void* dst, const void* src, dtype t, std::size_t n);

/// Whether data holds a NaN or +-Inf (f16, bf16, f32, f64; integer types: false).
bool has_nonfinite(const void* data, dtype t, std::size_t n);

/// The flavour picked for this process: "avx512", "avx2+f16c" or "portable".
std::string_view cast_kernels_name();

namespace cast_detail {
/// One flavour's loops, for tests that compare every flavour with the reference.
struct kernels {
  const char* name;
  bool (*narrow)(void* to, compression c, const void* from, dtype src, std::size_t n, float scale);
  void (*widen)(void* to, dtype dst, const void* from, compression c, std::size_t n);
  bool (*accumulate)(float* acc, const void* own, dtype src, float scale, const void* recv, compression c,
                     std::size_t n);
  bool (*nonfinite)(const void* data, dtype t, std::size_t n);
  uint32_t (*add_checked)(void* dst, const void* src, dtype t, std::size_t n);  ///< as add_checked_both
  bool (*add_check_sum)(void* dst, const void* src, dtype t, std::size_t n);    ///< as add_check_sum
};
/// The flavours this CPU can run, portable first; `count` receives their number.
const kernels* available(std::size_t& count);
}  // namespace cast_detail

}  // namespace chorus
