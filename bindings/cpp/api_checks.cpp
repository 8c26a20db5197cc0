// Boundary validation of submitted operations (see api_checks.hpp).
#include "bindings/cpp/api_checks.hpp"

#include <cmath>

#include <cstdint>
#include <limits>

#include "runtime/device/gpu.hpp"

namespace chorus::detail {
namespace {

status reject(const tensor_spec& s, const std::string& why) {
  return {errc::invalid_argument, describe(s) + ": " + why};
}

}  // namespace

/// Compression, the NaN/Inf check and prescale where they apply (apply_wire in api.cpp gives
/// the job's defaults only there; these are asked for explicitly).
static status check_wire(const tensor_spec& s) {
  const bool moves = s.kind == collective_kind::allreduce || s.kind == collective_kind::reducescatter ||
                     s.kind == collective_kind::allgather;
  if (static_cast<int>(s.wire) >= compression_count || static_cast<int>(s.check) >= nan_check_count)
    return reject(s, "unknown compression " + std::to_string(int(s.wire)) + " or nan check " +
                         std::to_string(int(s.check)));
  if (s.wire != compression::none) {
    const std::string what = "compression " + std::string(name_of(s.wire));
    if (!moves) return reject(s, what + " applies to allreduce, reducescatter and allgather only");
    if (s.type != dtype::f32 && s.type != dtype::f64)
      return reject(s, what + " applies to f32 and f64 tensors, not " + std::string(name_of(s.type)) +
                           "; submit this tensor with compression none");
    if (s.kind != collective_kind::allgather && s.op != reduce_op::sum && s.op != reduce_op::average)
      return reject(s, what + " applies to sum and average, not " + std::string(name_of(s.op)));
    if (s.device != device_kind::cpu) return reject(s, what + " applies to CPU tensors");
  }
  if (s.check != nan_check::off) {
    if (!moves) return reject(s, "the NaN/Inf check applies to allreduce, reducescatter and allgather only");
    if (s.device != device_kind::cpu) return reject(s, "the NaN/Inf check applies to CPU tensors");
  }
  if (s.prescale != 1.0f && (s.wire == compression::none || s.kind == collective_kind::allgather ||
                             !std::isfinite(s.prescale)))
    return reject(s, "prescale " + std::to_string(s.prescale) +
                         " applies to compressed allreduce and reducescatter (finite values) only");
  return {};
}

status check_operation(const tensor_spec& s, const void* data) {
  if (s.name.empty())
    return reject(s,
                  "empty tensor name; every operation needs a name, unique among the operations pending on this rank");
  if (static_cast<int>(s.type) >= dtype_count)
    return reject(s, "dtype " + std::to_string(static_cast<int>(s.type)) +
                         " is not one of f16, bf16, f32, f64, i32, i64, u8, i8, i16, bool");
  const bool reduces = s.kind == collective_kind::allreduce || s.kind == collective_kind::reducescatter;
  if (reduces && static_cast<int>(s.op) >= arithmetic_reduce_op_count)
    return reject(
        s, "reduce op " + std::to_string(static_cast<int>(s.op)) + " is not one of sum, average, min, max, product");
  if (reduces && s.type == dtype::boolean && s.op == reduce_op::average)
    return reject(s, "average of a bool tensor is not defined; use sum (logical or), max (or), min or product (and)");
  if (static_cast<int>(s.device) >= device_kind_count)
    return reject(s, "device " + std::to_string(static_cast<int>(s.device)) + " is not one of cpu, cuda");
  if (s.device == device_kind::cuda && !gpu::built())
    return reject(s, "a CUDA tensor, but this build of Chorus has no CUDA support (CHORUS_WITH_CUDA); pass a CPU "
                     "buffer");
  if (s.device == device_kind::cuda && s.kind != collective_kind::allreduce && s.kind != collective_kind::broadcast)
    return reject(s, std::string(name_of(s.kind)) +
                         " of a CUDA tensor is not run on the device; copy it to host memory first (CUDA tensors: "
                         "allreduce and broadcast; chorus.torch stages the others itself)");
  if (auto st = check_wire(s); !st.ok()) return st;
  if (s.kind == collective_kind::allgather && s.shape.empty())
    return reject(s, "allgather needs a tensor with at least one dimension (the rows to concatenate), got a scalar");
  if (s.kind == collective_kind::reducescatter && s.shape.empty())
    return reject(s, "reducescatter needs a tensor with at least one dimension (the rows to split), got a scalar");
  if (s.kind == collective_kind::alltoall && s.shape.empty())
    return reject(s, "alltoall needs a tensor with at least one dimension (the rows to send), got a scalar");
  int64_t elements = 1;
  for (auto d : s.shape) {
    if (d < 0) return reject(s, "shape " + format_shape(s.shape) + " has a negative dimension");
    if (d != 0 && elements > std::numeric_limits<int64_t>::max() / d)
      return reject(s, "shape " + format_shape(s.shape) + " has more elements than fit in 64 bits");
    elements *= d;
  }
  if (elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(size_of(s.type)))
    return reject(
        s, "shape " + format_shape(s.shape) + " of " + std::string(name_of(s.type)) + " is larger than 2^63 bytes");
  if (data == nullptr && elements > 0)
    return reject(s, "data is null but shape " + format_shape(s.shape) + " has " + std::to_string(elements) +
                         " element" + (elements == 1 ? "" : "s"));
  return {};
}

status check_root(const tensor_spec& s, int world_size) {
  if (s.kind != collective_kind::broadcast) return {};
  if (s.root < 0 || s.root >= world_size)
    return reject(s, "root " + std::to_string(s.root) + " is not a rank of this job (size " +
                         std::to_string(world_size) + ": roots 0-" + std::to_string(world_size - 1) + ")");
  return {};
}

status check_splits(const tensor_spec& s, const std::vector<int64_t>& splits, int world_size) {
  if (s.kind != collective_kind::alltoall) {
    if (!splits.empty()) return reject(s, "splits are only meaningful for alltoall");
    return {};
  }
  // The values first, every one of them: a sum that wrapped could otherwise match dim 0.
  int64_t sum = 0;
  for (std::size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0)
      return reject(s, "split " + std::to_string(i) + " is negative (" + std::to_string(splits[i]) + ")");
    if (__builtin_add_overflow(sum, splits[i], &sum))
      return reject(s, "split " + std::to_string(i) + " (" + std::to_string(splits[i]) +
                           ") makes the splits' sum overflow int64; they must sum to dim 0");
  }
  if (static_cast<int64_t>(splits.size()) != world_size)
    return reject(s, std::to_string(splits.size()) + " splits for a job of " + std::to_string(world_size) +
                         " ranks; give the rows for each rank, in rank order");
  int64_t dim0 = s.shape.empty() ? 1 : s.shape[0];
  if (sum != dim0)
    return reject(s, "splits sum to " + std::to_string(sum) + " rows but the tensor's dim 0 is " +
                         std::to_string(dim0) + " (shape " + format_shape(s.shape) + ")");
  return {};
}

}  // namespace chorus::detail
