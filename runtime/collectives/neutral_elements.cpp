// Identity elements per dtype and reduce op (see neutral_elements.hpp).
#include "runtime/collectives/neutral_elements.hpp"

#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/core/half.hpp"

namespace chorus {
namespace {

template <class T>
void fill(void* data, std::size_t count, T value) {
  auto* p = static_cast<std::byte*>(data);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(p + i * sizeof(T), &value, sizeof(T));
}

/// The identity as a float (float types) or as the integer type's value.
template <class T>
T integer_identity(reduce_op op) {
  switch (op) {
    case reduce_op::product: return T{1};
    case reduce_op::min: return std::numeric_limits<T>::max();
    case reduce_op::max: return std::numeric_limits<T>::lowest();
    case reduce_op::band: return T(~T{0});
    default: return T{0};
  }
}

float float_identity(reduce_op op) {
  switch (op) {
    case reduce_op::product: return 1.0f;
    case reduce_op::min: return std::numeric_limits<float>::infinity();
    case reduce_op::max: return -std::numeric_limits<float>::infinity();
    default: return 0.0f;
  }
}

}  // namespace

void fill_identity(void* data, std::size_t count, dtype t, reduce_op op) {
  switch (t) {
    case dtype::f16: return fill<uint16_t>(data, count, f32_to_f16(float_identity(op)));
    case dtype::bf16: return fill<uint16_t>(data, count, f32_to_bf16(float_identity(op)));
    case dtype::f32: return fill<float>(data, count, float_identity(op));
    case dtype::f64: return fill<double>(data, count, static_cast<double>(float_identity(op)));
    case dtype::i32: return fill<int32_t>(data, count, integer_identity<int32_t>(op));
    case dtype::i64: return fill<int64_t>(data, count, integer_identity<int64_t>(op));
    case dtype::u8: return fill<uint8_t>(data, count, integer_identity<uint8_t>(op));
    case dtype::i8: return fill<int8_t>(data, count, integer_identity<int8_t>(op));
    case dtype::i16: return fill<int16_t>(data, count, integer_identity<int16_t>(op));
    case dtype::boolean:  // "or" and "exclusive or" start from false, "and" (min, product, band) from true
      return fill<uint8_t>(data, count,
                           op == reduce_op::min || op == reduce_op::product || op == reduce_op::band ? 1 : 0);
  }
}

}  // namespace chorus
