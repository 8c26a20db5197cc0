// Element types and reduction operators that Chorus moves and reduces.
// f16 and bf16 are stored as raw 16-bit words and accumulate in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace chorus {

/// boolean: one byte per element, 0 or 1 (as torch.bool); it reduces as logic: sum, max and bor
/// are "or", min, product and band "and", bxor "exclusive or"; average is refused.
enum class dtype : uint8_t { f16 = 0, bf16 = 1, f32 = 2, f64 = 3, i32 = 4, i64 = 5, u8 = 6, i8 = 7, i16 = 8, boolean = 9 };
inline constexpr int dtype_count = 10;

/// band, bor and bxor (bitwise and, or, exclusive or: torch.distributed's BAND, BOR, BXOR) apply
/// to integer and boolean types only; a float with one of them is refused where it is submitted.
enum class reduce_op : uint8_t { sum = 0, average = 1, min = 2, max = 3, product = 4, band = 5, bor = 6, bxor = 7 };
inline constexpr int reduce_op_count = 8;
/// The ops before the bitwise ones (sum .. product): the ones the Horovod-style APIs take.
inline constexpr int arithmetic_reduce_op_count = 5;

/// Whether `op` is one of the bitwise ops (band, bor, bxor).
constexpr bool is_bitwise(reduce_op op) { return op == reduce_op::band || op == reduce_op::bor || op == reduce_op::bxor; }
/// Whether `t` holds integers (or booleans): the types the bitwise ops apply to.
constexpr bool is_integral(dtype t) { return t != dtype::f16 && t != dtype::bf16 && t != dtype::f32 && t != dtype::f64; }

/// Bytes per element.
std::size_t size_of(dtype t);
/// "f32", "bf16", ...
std::string_view name_of(dtype t);
std::string_view name_of(reduce_op op);
std::optional<dtype> parse_dtype(std::string_view s);
std::optional<reduce_op> parse_reduce_op(std::string_view s);

}  // namespace chorus
