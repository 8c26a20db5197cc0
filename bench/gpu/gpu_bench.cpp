// chorus-gpu-bench: the memory bandwidth of the CUDA element-wise kernels (casts, NaN/Inf
// count; runtime/device/cuda/kernels.hpp) beside a device-to-device cudaMemcpyAsync of the
// same f32 buffer on the same GPU, timed with CUDA events (warm-ups, then the median of runs).
// Prints, per buffer size (default 64 and 256 MiB of f32; --mib N [--mib M ...], --runs N):
//   RESULT gpu_device <device name, spaces as underscores>
//   RESULT gpu_kernel <name> <bytes in> <GB/s read+written> <fraction of memcpy_d2d's GB/s>
// (GB = 1e9 bytes; bytes in tells the sizes apart: f16/bf16 inputs are half the f32 bytes).
// Without a usable CUDA device it prints "SKIP: no CUDA device: <why>" and exits 0.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"
#include "runtime/device/cuda/kernels.hpp"

namespace {

using chorus::dtype;
using chorus::status;

constexpr int warmups = 5;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "chorus-gpu-bench: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    fail(std::string(call) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
}

void check(const status& st) {
  if (!st.ok()) fail(st.to_string());
}

// Why no CUDA device is usable, or "" when device 0 is (its context is then created).
std::string no_device_reason() {
  int n = 0;  // left untouched when the call fails
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  if (n <= 0) return "cudaGetDeviceCount reports no device";
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    return std::string("cudaSetDevice(0): ") + cudaGetErrorString(e);
  }
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
    return std::string("cudaFree(nullptr): ") + cudaGetErrorString(e);
  }
  return "";
}

// Median seconds of one `op`: each timed run enqueues it `reps` times between two events (so
// the launch latency before the first is spread over several), after `warmups` such runs.
double median_seconds(cudaStream_t stream, int runs, int reps, const std::function<void()>& op) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> seconds;
  for (int r = 0; r < warmups + runs; ++r) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) op();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (r >= warmups) seconds.push_back(double(ms) / 1e3 / reps);
  }
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

// One buffer size: every kernel and the memcpy reference.
void bench_size(std::size_t mib, int runs, cudaStream_t stream) {
  const std::size_t bytes = mib << 20, n = bytes / sizeof(float);
  const int reps = int(std::max<std::size_t>(1, 1280 / mib));  // >= ~1.3 GiB per timed run
  const std::string size = std::to_string(mib) + " MiB";

  // Finite values in [-1000, 1000) from a cheap generator, one NaN and one infinity.
  std::vector<float> host(n);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (float& f : host) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = float(int64_t(x >> 40) - (int64_t(1) << 23)) * (1000.0f / float(1 << 23));
  }
  host[n / 3] = std::numeric_limits<float>::quiet_NaN();
  host[n - 1] = std::numeric_limits<float>::infinity();

  auto* f32_in = static_cast<float*>(device_alloc(bytes));
  auto* f32_out = static_cast<float*>(device_alloc(bytes));
  auto* half = device_alloc(bytes / 2);
  auto* counter = static_cast<unsigned long long*>(device_alloc(sizeof(unsigned long long)));
  check(cudaMemcpy(f32_in, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemset(counter, 0, sizeof *counter), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  struct kernel {
    std::string name;
    std::size_t bytes_in;
    std::size_t bytes_moved;  // read + written
    std::function<void()> op;
  };
  const std::vector<kernel> kernels = {
      {"memcpy_d2d", bytes, 2 * bytes,
       [&] { check(cudaMemcpyAsync(f32_out, f32_in, bytes, cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync"); }},
      {"cast_f32_f16", bytes, bytes + bytes / 2,
       [&] { check(chorus::gpu::cast(f32_in, dtype::f32, half, dtype::f16, n, stream)); }},
      {"cast_f16_f32", bytes / 2, bytes / 2 + bytes,
       [&] { check(chorus::gpu::cast(half, dtype::f16, f32_out, dtype::f32, n, stream)); }},
      {"cast_f32_bf16", bytes, bytes + bytes / 2,
       [&] { check(chorus::gpu::cast(f32_in, dtype::f32, half, dtype::bf16, n, stream)); }},
      {"cast_bf16_f32", bytes / 2, bytes / 2 + bytes,
       [&] { check(chorus::gpu::cast(half, dtype::bf16, f32_out, dtype::f32, n, stream)); }},
      {"nonfinite_f32", bytes, bytes,
       [&] { check(chorus::gpu::count_nonfinite(f32_in, dtype::f32, n, counter, stream)); }},
  };
  double memcpy_gbps = 0;
  for (const kernel& k : kernels) {
    const double s = median_seconds(stream, runs, reps, k.op);
    const double gbps = double(k.bytes_moved) / s / 1e9;
    if (k.name == "memcpy_d2d") memcpy_gbps = gbps;
    std::printf("RESULT gpu_kernel %s %zu %.1f %.3f\n", k.name.c_str(), k.bytes_in, gbps,
                gbps / memcpy_gbps);
    std::fflush(stdout);
  }

  // The count ran (warmups + runs) * reps times over one NaN and one infinity.
  unsigned long long found = 0;
  check(cudaMemcpy(&found, counter, sizeof found, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const unsigned long long expected = 2ull * (warmups + runs) * reps;
  if (found != expected) {
    fail("nonfinite_f32 of " + size + " counted " + std::to_string(found) + ", expected " +
         std::to_string(expected));
  }
  for (void* p : {static_cast<void*>(f32_in), static_cast<void*>(f32_out), half,
                  static_cast<void*>(counter)}) {
    check(cudaFree(p), "cudaFree");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes;
  int runs = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--mib" || arg == "--runs") && i + 1 < argc) {
      const long v = std::strtol(argv[++i], nullptr, 10);
      if (v <= 0) fail(arg + " needs a positive number, got '" + argv[i] + "'");
      if (arg == "--mib") sizes.push_back(std::size_t(v));
      else runs = int(v);
    } else {
      fail("unknown argument '" + arg + "' (usage: chorus-gpu-bench [--mib N]... [--runs N])");
    }
  }
  if (sizes.empty()) sizes = {64, 256};

  if (const std::string why = no_device_reason(); !why.empty()) {
    std::printf("SKIP: no CUDA device: %s\n", why.c_str());
    return 0;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::string name = prop.name;
  std::replace(name.begin(), name.end(), ' ', '_');
  std::printf("RESULT gpu_device %s\n", name.c_str());
  std::printf("# %d SMs, %.1f GiB; GB/s = 1e9 bytes read + written per second; median of %d "
              "runs; target: casts and the NaN/Inf count >= 0.80 of memcpy_d2d\n",
              prop.multiProcessorCount, double(prop.totalGlobalMem) / double(1ull << 30), runs);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  for (std::size_t mib : sizes) bench_size(mib, runs, stream);
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}
