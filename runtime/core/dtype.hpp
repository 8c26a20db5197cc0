// What the runtime knows of element types and reduction operators (their definitions are the
// public API's: include/chorus/types.hpp): sizes, names, parsing, which ops apply to which types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "chorus/types.hpp"

namespace chorus {

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
