// Which build of the element-wise kernels (reductions, casts, f16/bf16 conversions) this process
// runs: the best its CPU has, or the portable loops. runtime/config sets it from
// CHORUS_REDUCE_KERNELS (portable: for debugging, and so the tests can check both builds).
#pragma once

namespace chorus {

void force_portable_kernels(bool on);
bool portable_kernels_forced();

}  // namespace chorus
