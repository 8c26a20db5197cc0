// Element-wise CUDA kernels of the data plane: casts between f32 and the 16-bit floats (wire
// compression) and a count of NaN/Inf elements (the NaN/Inf check). Each function only ENQUEUES
// work on the caller's stream and never synchronizes; its status covers the arguments and the
// launch, not the kernel's later execution (that surfaces at the caller's next stream sync).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"

namespace chorus::gpu {

/// Enqueues on `stream` the cast of `count` elements of device memory `in` (dtype `from`) into
/// device memory `out` (dtype `to`), on the calling thread's current CUDA device.
///
/// Pairs: f32 -> f16, f32 -> bf16 (round to nearest even, overflow to infinity, subnormals kept,
/// as IEEE casting does), f16 -> f32, bf16 -> f32 (exact). Infinities stay infinite and a NaN
/// stays a NaN; a NaN's sign and payload are whatever the GPU's conversion gives (they may
/// differ from runtime/core/half.hpp's host conversions; every other value agrees bit for bit).
/// Any pointer alignment to the element size and any count work; 16-byte vectors are used
/// where `in` and `out` allow them.
///
/// Errors: invalid_argument for another pair (naming both dtypes), a null pointer with
/// count > 0, a pointer not aligned to its element size, or overlapping `in` and `out`;
/// internal, with CUDA's error text, when the device cannot be queried or the launch fails.
/// count == 0 enqueues nothing and returns ok (after checking the dtypes).
/// Thread-safety: any threads may call at once (launch parameters are cached under a lock).
status cast(const void* in, dtype from, void* out, dtype to, std::size_t count,
            cudaStream_t stream);

/// Enqueues on `stream` a kernel that adds to the device counter `*counter` the number of
/// elements of device memory `data` (`count` elements of dtype `t`) that are NaN or infinite.
/// The counter is never reset here: callers zero it (cudaMemsetAsync) and may accumulate
/// several tensors into one. Each block adds its partial count with one atomicAdd.
///
/// f32, f16, bf16 and f64 are checked; integer dtypes cannot hold NaN/Inf, so nothing is
/// enqueued and the counter is left alone (ok). Errors as cast() (null `data` or `counter`
/// with count > 0, a misaligned `data` or `counter`, a failed launch).
status count_nonfinite(const void* data, dtype t, std::size_t count,
                       unsigned long long* counter, cudaStream_t stream);

}  // namespace chorus::gpu
