// Sizes, names and parsing of dtypes and reduce ops.
#include "runtime/core/dtype.hpp"

namespace chorus {

std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::f16: case dtype::bf16: return 2;
    case dtype::f32: case dtype::i32: return 4;
    case dtype::f64: case dtype::i64: return 8;
    case dtype::u8: case dtype::i8: case dtype::boolean: return 1;
    case dtype::i16: return 2;
  }
  return 0;
}

std::string_view name_of(dtype t) {
  static constexpr std::string_view names[] = {"f16", "bf16", "f32", "f64", "i32", "i64", "u8", "i8", "i16", "bool"};
  auto i = static_cast<int>(t);
  return i < dtype_count ? names[i] : "?";
}

std::string_view name_of(reduce_op op) {
  static constexpr std::string_view names[] = {"sum", "average", "min", "max", "product", "band", "bor", "bxor"};
  auto i = static_cast<int>(op);
  return i < reduce_op_count ? names[i] : "?";
}

std::optional<dtype> parse_dtype(std::string_view s) {
  for (int i = 0; i < dtype_count; ++i)
    if (name_of(static_cast<dtype>(i)) == s) return static_cast<dtype>(i);
  return std::nullopt;
}

std::optional<reduce_op> parse_reduce_op(std::string_view s) {
  for (int i = 0; i < reduce_op_count; ++i)
    if (name_of(static_cast<reduce_op>(i)) == s) return static_cast<reduce_op>(i);
  return std::nullopt;
}

}  // namespace chorus
