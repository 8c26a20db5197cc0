// The vocabulary of the public API: element types, reduce ops, what an operation asks of the
// wire, and where a buffer lives. Part of include/chorus/: it includes nothing of Chorus's own;
// the runtime builds on these definitions (runtime/core/dtype.hpp, runtime/compression/options.hpp).
// Thread-safety: plain values.
#pragma once

#include <cstdint>

namespace chorus {

/// Element types. f16 and bf16 are stored as raw 16-bit words and accumulate in f32. boolean:
/// one byte per element, 0 or 1 (as torch.bool); it reduces as logic: sum, max and bor are "or",
/// min, product and band "and", bxor "exclusive or"; average is refused.
enum class dtype : uint8_t { f16 = 0, bf16 = 1, f32 = 2, f64 = 3, i32 = 4, i64 = 5, u8 = 6, i8 = 7, i16 = 8, boolean = 9 };
inline constexpr int dtype_count = 10;

/// band, bor and bxor (bitwise and, or, exclusive or: torch.distributed's BAND, BOR, BXOR) apply
/// to integer and boolean types only, and only through torch.distributed's backend; the C and
/// C++ APIs take sum .. product.
enum class reduce_op : uint8_t { sum = 0, average = 1, min = 2, max = 3, product = 4, band = 5, bor = 6, bxor = 7 };
inline constexpr int reduce_op_count = 8;
/// The ops before the bitwise ones (sum .. product): the ones the C and C++ APIs take.
inline constexpr int arithmetic_reduce_op_count = 5;

/// What a collective puts on the wire for f32/f64 data.
enum class compression : uint8_t { none = 0, fp16 = 1, bf16 = 2 };
inline constexpr int compression_count = 3;

/// off: no check; error: an operation whose input holds NaN/Inf on any rank fails on every
/// rank, naming the tensor and those ranks; skip: it completes and every rank learns the same
/// list of such ranks (handle::nonfinite_ranks), so that all skip the step together.
enum class nan_check : uint8_t { off = 0, error = 1, skip = 2 };
inline constexpr int nan_check_count = 3;

/// Where a buffer lives.
enum class device_kind : uint8_t { cpu = 0, cuda = 1 };
inline constexpr int device_kind_count = 2;

}  // namespace chorus
