// What the rest of Chorus asks of CUDA without including its headers: whether this build has
// it, how many devices this process sees, on which device a pointer lives, and "ready" events
// that order Chorus' reads of a tensor after the work its caller queued on a CUDA stream.
// Without CHORUS_WITH_CUDA every query answers "no device" and every request is an error.
#pragma once

#include <memory>

#include "runtime/core/status.hpp"

namespace chorus::gpu {

/// True when this build has CUDA support (CHORUS_WITH_CUDA).
bool built();

/// CUDA devices this process can use; 0 without CUDA, a driver or a device (never fails).
int visible_devices();

/// The CUDA device `ptr` belongs to (device memory, or host memory mapped for one device).
/// invalid_argument when `ptr` is ordinary host memory or unknown to CUDA.
result<int> device_of(const void* ptr);

/// A cudaEvent_t recorded on `stream` (a cudaStream_t; null: the legacy default stream) of
/// device `device`, after the work queued there so far; destroyed with the last copy of the
/// pointer.
result<std::shared_ptr<void>> record_ready(int device, void* stream);

}  // namespace chorus::gpu
