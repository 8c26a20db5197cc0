// Checks at the API boundary: what one rank can tell about an operation before it enters the
// pipeline. Every rejection is errc::invalid_argument, names the operation and the tensor,
// the value seen and what was expected. Pure functions, shared by the C++ and C APIs.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::detail {

/// Name, dtype, op, device, dimensions, element count and the buffer pointer. Needs no job.
status check_operation(const tensor_spec& spec, const void* data);

/// The broadcast root against the job's size (other kinds always pass).
status check_root(const tensor_spec& spec, int world_size);

/// Alltoall: one split per rank, none negative, summing to dim 0 without overflowing int64 (a
/// rejection names the split's index). Other kinds: no splits.
status check_splits(const tensor_spec& spec, const std::vector<int64_t>& splits, int world_size);

}  // namespace chorus::detail
