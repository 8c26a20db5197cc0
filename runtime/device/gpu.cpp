// CUDA queries behind runtime/device/gpu.hpp; without CHORUS_WITH_CUDA, the "no device" answers.
#include "runtime/device/gpu.hpp"

#include <string>

#if CHORUS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace chorus::gpu {

#if CHORUS_WITH_CUDA

bool built() { return true; }

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clears the sticky "no driver" error
    return 0;
  }
  return n;
}

result<int> device_of(const void* ptr) {
  cudaPointerAttributes a{};
  if (auto e = cudaPointerGetAttributes(&a, ptr); e != cudaSuccess) {
    (void)cudaGetLastError();
    return status{errc::invalid_argument, std::string("cudaPointerGetAttributes: ") + cudaGetErrorString(e)};
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    return status{errc::invalid_argument, "the pointer is not CUDA device memory"};
  return a.device;
}

result<std::shared_ptr<void>> record_ready(int device, void* stream) {
  // The caller's thread keeps its current device (a framework may rely on it).
  int before = -1;
  if (cudaGetDevice(&before) != cudaSuccess) before = -1;
  struct restore {
    int d;
    ~restore() {
      if (d >= 0) cudaSetDevice(d);
    }
  } back{before == device ? -1 : before};
  if (auto e = cudaSetDevice(device); e != cudaSuccess)
    return status{errc::internal, "cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e)};
  cudaEvent_t ev = nullptr;
  if (auto e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
    return status{errc::internal, std::string("cudaEventCreate: ") + cudaGetErrorString(e)};
  if (auto e = cudaEventRecord(ev, static_cast<cudaStream_t>(stream)); e != cudaSuccess) {
    cudaEventDestroy(ev);
    return status{errc::internal, std::string("cudaEventRecord on the caller's stream: ") + cudaGetErrorString(e)};
  }
  return std::shared_ptr<void>(ev, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
}

#else

bool built() { return false; }
int visible_devices() { return 0; }
result<int> device_of(const void*) {
  return status{errc::config, "this build of Chorus has no CUDA support (CHORUS_WITH_CUDA is off)"};
}
result<std::shared_ptr<void>> record_ready(int, void*) {
  return status{errc::config, "this build of Chorus has no CUDA support (CHORUS_WITH_CUDA is off)"};
}

#endif

}  // namespace chorus::gpu
