// Neutral elements of the reductions: what a rank that has joined (Horovod's join) contributes
// to the other ranks' allreduces and reduce-scatters, so that their results are those of the
// ranks still training.
#pragma once

#include <cstddef>

#include "runtime/core/dtype.hpp"

namespace chorus {

/// Fills count elements of `data` with the identity of `op` for `t`: 0 for sum and average,
/// 1 for product, the largest value for min (+inf for floats), the smallest for max (-inf),
/// all bits set for band, 0 for bor and bxor.
/// (An average still divides by every rank, joined ones included, as Horovod does.)
void fill_identity(void* data, std::size_t count, dtype t, reduce_op op);

}  // namespace chorus
