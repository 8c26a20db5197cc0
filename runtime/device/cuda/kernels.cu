// The element-wise kernels of kernels.hpp: f32 <-> f16/bf16 casts and the NaN/Inf count.
// All are memory-bound grid-stride loops: one resident wave of blocks (SMs x occupancy, queried
// once per kernel and device), 16-byte vector loads and stores over the aligned body, scalar
// code for the misaligned head and the tail, several vectors in flight per thread.
#include "runtime/device/cuda/kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

namespace chorus::gpu {
namespace {

constexpr int block_threads = 256;  // a multiple of 32 (the block reduction relies on it)
constexpr std::size_t vector_bytes = 16;

// ---- conversions (device) --------------------------------------------------------------

__device__ inline std::uint32_t word_of(__half2 h) {
  std::uint32_t w;
  memcpy(&w, &h, sizeof w);
  return w;
}
__device__ inline std::uint32_t word_of(__nv_bfloat162 h) {
  std::uint32_t w;
  memcpy(&w, &h, sizeof w);
  return w;
}

// f32 -> 16-bit: one element, or two packed into a word (the first in the low half, which is
// the lower address on a little-endian GPU). Round to nearest even, as cvt.rn does.
struct to_f16 {
  __device__ static std::uint16_t one(float x) { return __half_as_ushort(__float2half_rn(x)); }
  __device__ static std::uint32_t two(float lo, float hi) {
    return word_of(__floats2half2_rn(lo, hi));
  }
};
struct to_bf16 {
  __device__ static std::uint16_t one(float x) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
  __device__ static std::uint32_t two(float lo, float hi) {
    return word_of(__floats2bfloat162_rn(lo, hi));
  }
};

// 16-bit -> f32 (exact): one element, or the two halves of a word.
struct from_f16 {
  __device__ static float one(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }
  __device__ static float2 two(std::uint32_t w) {
    __half2 h;
    memcpy(&h, &w, sizeof w);
    return __half22float2(h);
  }
};
struct from_bf16 {
  __device__ static float one(std::uint16_t h) {
    return __bfloat162float(__ushort_as_bfloat16(h));
  }
  __device__ static float2 two(std::uint32_t w) {
    __nv_bfloat162 h;
    memcpy(&h, &w, sizeof w);
    return __bfloat1622float2(h);
  }
};

// Non-finite tests on raw bits: the exponent field is all ones (infinity or NaN). `word`
// counts the elements held in one 32-bit word; f64 keeps its exponent in the high word.
template <std::uint16_t ExpMask>
struct half_check {  // f16 (0x7c00) and bf16 (0x7f80)
  using elem = std::uint16_t;
  __device__ static unsigned one(elem e) { return (e & ExpMask) == ExpMask; }
  __device__ static unsigned vec(uint4 x) { return word(x.x) + word(x.y) + word(x.z) + word(x.w); }
  __device__ static unsigned word(std::uint32_t w) {
    constexpr std::uint32_t hi = std::uint32_t(ExpMask) << 16;
    return unsigned((w & ExpMask) == ExpMask) + unsigned((w & hi) == hi);
  }
};
struct f32_check {
  using elem = std::uint32_t;
  __device__ static unsigned one(elem e) { return (e & 0x7f800000u) == 0x7f800000u; }
  __device__ static unsigned vec(uint4 x) { return one(x.x) + one(x.y) + one(x.z) + one(x.w); }
};
struct f64_check {
  using elem = std::uint64_t;
  __device__ static unsigned one(elem e) {
    return (e & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
  }
  __device__ static unsigned high(std::uint32_t w) { return (w & 0x7ff00000u) == 0x7ff00000u; }
  __device__ static unsigned vec(uint4 x) { return high(x.y) + high(x.w); }  // two doubles
};

// ---- kernels ---------------------------------------------------------------------------
// Layout of every kernel's work: elements [0, head) scalar, then `vecs` vectors of 8 (casts)
// or 16 bytes' worth (count) with aligned 16-byte accesses, then scalar up to `count`.

__device__ inline std::size_t thread_index() {
  return std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_threads() { return std::size_t(gridDim.x) * blockDim.x; }

// Loads the U vectors vin[base + u * stride] that lie below `n` into a[u]: all loads are
// issued before any is used, so U of them are in flight per thread.
template <int U, class V>
__device__ __forceinline__ void load_strided(V (&a)[U], const V* vin, std::size_t base,
                                             std::size_t stride, std::size_t n) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::size_t v = base + u * stride;
    if (v < n) a[u] = vin[v];
  }
}

template <class Pack, int U>
__global__ void __launch_bounds__(block_threads)
    narrow_kernel(const float* __restrict__ in, std::uint16_t* __restrict__ out,
                  std::size_t count, std::size_t head, std::size_t vecs) {
  const std::size_t tid = thread_index(), stride = grid_threads();
  for (std::size_t i = tid; i < head; i += stride) out[i] = Pack::one(in[i]);
  const float4* vin = reinterpret_cast<const float4*>(in + head);  // 2 per vector
  uint4* vout = reinterpret_cast<uint4*>(out + head);              // 1 per vector
  for (std::size_t base = tid; base < vecs; base += U * stride) {
    float4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {  // all loads first: U * 32 bytes in flight per thread
      const std::size_t v = base + u * stride;
      if (v < vecs) {
        a[u] = vin[2 * v];
        b[u] = vin[2 * v + 1];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::size_t v = base + u * stride;
      if (v < vecs) {
        vout[v] = make_uint4(Pack::two(a[u].x, a[u].y), Pack::two(a[u].z, a[u].w),
                             Pack::two(b[u].x, b[u].y), Pack::two(b[u].z, b[u].w));
      }
    }
  }
  for (std::size_t i = head + 8 * vecs + tid; i < count; i += stride) out[i] = Pack::one(in[i]);
}

template <class Unpack, int U>
__global__ void __launch_bounds__(block_threads)
    widen_kernel(const std::uint16_t* __restrict__ in, float* __restrict__ out,
                 std::size_t count, std::size_t head, std::size_t vecs) {
  const std::size_t tid = thread_index(), stride = grid_threads();
  for (std::size_t i = tid; i < head; i += stride) out[i] = Unpack::one(in[i]);
  // Each thread turns 4 inputs (8 bytes) into one float4, so both a warp's loads (256 bytes)
  // and its stores (512 bytes) are contiguous; a vector of 8 is two such quads.
  const uint2* vin = reinterpret_cast<const uint2*>(in + head);
  float4* vout = reinterpret_cast<float4*>(out + head);
  const std::size_t quads = 2 * vecs;
  for (std::size_t base = tid; base < quads; base += U * stride) {
    uint2 a[U];
    load_strided(a, vin, base, stride, quads);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::size_t v = base + u * stride;
      if (v < quads) {
        const float2 p = Unpack::two(a[u].x), q = Unpack::two(a[u].y);
        vout[v] = make_float4(p.x, p.y, q.x, q.y);
      }
    }
  }
  for (std::size_t i = head + 8 * vecs + tid; i < count; i += stride) out[i] = Unpack::one(in[i]);
}

// Sums `n` over the block and adds the sum to *counter with one atomicAdd (none when zero).
// Every thread of the block must call it.
__device__ void block_add(unsigned long long n, unsigned long long* counter) {
  __shared__ unsigned long long warp_sums[block_threads / 32];
  for (int off = 16; off > 0; off >>= 1) n += __shfl_down_sync(0xffffffffu, n, off);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = n;
  __syncthreads();
  if (warp == 0) {
    n = lane < blockDim.x / 32 ? warp_sums[lane] : 0;
    for (int off = 16; off > 0; off >>= 1) n += __shfl_down_sync(0xffffffffu, n, off);
    if (lane == 0 && n != 0) atomicAdd(counter, n);
  }
}

template <class Check, int U>
__global__ void __launch_bounds__(block_threads)
    nonfinite_kernel(const typename Check::elem* __restrict__ data, std::size_t count,
                     std::size_t head, std::size_t vecs, unsigned long long* counter) {
  constexpr std::size_t per_vec = vector_bytes / sizeof(typename Check::elem);
  const std::size_t tid = thread_index(), stride = grid_threads();
  unsigned long long n = 0;
  for (std::size_t i = tid; i < head; i += stride) n += Check::one(data[i]);
  const uint4* vin = reinterpret_cast<const uint4*>(data + head);
  for (std::size_t base = tid; base < vecs; base += U * stride) {
    uint4 a[U];
    load_strided(a, vin, base, stride, vecs);
    unsigned found = 0;  // at most U * 8
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * stride < vecs) found += Check::vec(a[u]);
    }
    n += found;
  }
  for (std::size_t i = head + per_vec * vecs + tid; i < count; i += stride) {
    n += Check::one(data[i]);
  }
  block_add(n, counter);
}

// ---- host side: checks, split, grid, launch ----------------------------------------------

status cuda_failed(const std::string& what, const char* call, cudaError_t e) {
  (void)cudaGetLastError();  // a non-sticky error must not be blamed on the next call
  return {errc::internal, what + ": " + call + " failed: " + cudaGetErrorName(e) + ": " +
                              cudaGetErrorString(e)};
}

std::string pointer_text(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

status check_buffer(const std::string& what, const char* name, const void* p,
                    std::size_t align, std::size_t count) {
  if (count > 0 && p == nullptr) {
    return {errc::invalid_argument,
            what + ": " + name + " is null with count " + std::to_string(count)};
  }
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
    return {errc::invalid_argument, what + ": " + name + " at " + pointer_text(p) +
                                        " is not aligned to its element size of " +
                                        std::to_string(align) + " bytes"};
  }
  return {};
}

// The aligned middle of [0, count): the first h < per_vec at which both `in` and `out` sit on
// a 16-byte boundary (stepping in_size and out_size bytes per element), and how many whole
// vectors of per_vec elements follow. No such h: all scalar (head = count, vecs = 0).
struct split {
  std::size_t head;
  std::size_t vecs;
};
split split_for_vectors(const void* in, std::size_t in_size, const void* out,
                        std::size_t out_size, std::size_t per_vec, std::size_t count) {
  const auto a = reinterpret_cast<std::uintptr_t>(in);
  const auto b = reinterpret_cast<std::uintptr_t>(out);
  for (std::size_t h = 0; h < per_vec && h < count; ++h) {
    if ((a + h * in_size) % vector_bytes == 0 && (b + h * out_size) % vector_bytes == 0) {
      return {h, (count - h) / per_vec};
    }
  }
  return {count, 0};
}

// Blocks of `kernel` resident at once on the current device (SMs x blocks per SM), cached
// per (kernel, device): a grid of this size fills the GPU in one wave, and a larger one would
// leave a second, partial wave behind the grid-stride loop.
template <class Kernel>
result<int> resident_blocks(Kernel kernel, const std::string& what) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return cuda_failed(what, "cudaGetDevice", e);
  }
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cache;
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  int sms = 0, per_sm = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess) {
    return cuda_failed(what, "cudaDeviceGetAttribute(MultiProcessorCount)", e);
  }
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                                    block_threads, 0);
      e != cudaSuccess) {
    return cuda_failed(what, "cudaOccupancyMaxActiveBlocksPerMultiprocessor", e);
  }
  if (sms <= 0 || per_sm <= 0) {
    return status{errc::internal, what + ": device " + std::to_string(device) + " reports " +
                                      std::to_string(sms) + " SMs and " +
                                      std::to_string(per_sm) + " resident blocks per SM"};
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = sms * per_sm;
  return sms * per_sm;
}

// Grid for `scalar` scalar elements and `vecs` vectors done U at a time per thread.
template <class Kernel>
result<unsigned> grid_for(Kernel kernel, const std::string& what, std::size_t scalar,
                          std::size_t vecs, int unroll) {
  result<int> limit = resident_blocks(kernel, what);
  if (!limit) return limit.error();
  const std::size_t threads = std::max<std::size_t>(
      {scalar, (vecs + unroll - 1) / unroll, std::size_t(1)});
  const std::size_t wanted = (threads + block_threads - 1) / block_threads;
  return unsigned(std::min<std::size_t>(wanted, std::size_t(*limit)));
}

status launched(const std::string& what) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return cuda_failed(what, "kernel launch", e);
  }
  return {};
}

// A cast kernel over vectors of 8 elements, In to Out; each thread takes `parts` pieces of a
// vector (widen: two quads), U at a time.
template <int U, class In, class Out>
status launch_cast(const std::string& what, void (*kernel)(const In*, Out*, std::size_t, std::size_t, std::size_t),
                   std::size_t parts, const void* in, void* out, std::size_t count, cudaStream_t stream) {
  const split s = split_for_vectors(in, sizeof(In), out, sizeof(Out), 8, count);
  result<unsigned> grid = grid_for(kernel, what, count - 8 * s.vecs, parts * s.vecs, U);
  if (!grid) return grid.error();
  kernel<<<*grid, block_threads, 0, stream>>>(static_cast<const In*>(in), static_cast<Out*>(out), count, s.head,
                                              s.vecs);
  return launched(what);
}

template <class Pack>
status launch_narrow(const std::string& what, const void* in, void* out, std::size_t count,
                     cudaStream_t stream) {
  return launch_cast<2, float, std::uint16_t>(what, narrow_kernel<Pack, 2>, 1, in, out, count, stream);
}

template <class Unpack>
status launch_widen(const std::string& what, const void* in, void* out, std::size_t count,
                    cudaStream_t stream) {
  return launch_cast<4, std::uint16_t, float>(what, widen_kernel<Unpack, 4>, 2, in, out, count, stream);
}

template <class Check>
status launch_count(const std::string& what, const void* data, std::size_t count,
                    unsigned long long* counter, cudaStream_t stream) {
  constexpr int U = 4;
  constexpr std::size_t size = sizeof(typename Check::elem), per_vec = vector_bytes / size;
  const split s = split_for_vectors(data, size, data, size, per_vec, count);
  const auto kernel = nonfinite_kernel<Check, U>;
  result<unsigned> grid = grid_for(kernel, what, count - per_vec * s.vecs, s.vecs, U);
  if (!grid) return grid.error();
  kernel<<<*grid, block_threads, 0, stream>>>(
      static_cast<const typename Check::elem*>(data), count, s.head, s.vecs, counter);
  return launched(what);
}

bool is_pair(dtype from, dtype to, dtype a, dtype b) { return from == a && to == b; }

}  // namespace

status cast(const void* in, dtype from, void* out, dtype to, std::size_t count,
            cudaStream_t stream) {
  const std::string what = "gpu::cast " + std::string(name_of(from)) + " -> " +
                           std::string(name_of(to)) + " of " + std::to_string(count) +
                           " elements";
  const bool supported = is_pair(from, to, dtype::f32, dtype::f16) ||
                         is_pair(from, to, dtype::f32, dtype::bf16) ||
                         is_pair(from, to, dtype::f16, dtype::f32) ||
                         is_pair(from, to, dtype::bf16, dtype::f32);
  if (!supported) {
    return {errc::invalid_argument,
            "gpu::cast: no GPU cast from " + std::string(name_of(from)) + " to " +
                std::string(name_of(to)) +
                " (supported: f32 -> f16, f32 -> bf16, f16 -> f32, bf16 -> f32)"};
  }
  const std::size_t in_size = size_of(from), out_size = size_of(to);
  if (status st = check_buffer(what, "in", in, in_size, count); !st) return st;
  if (status st = check_buffer(what, "out", out, out_size, count); !st) return st;
  if (count == 0) return {};
  const auto a = reinterpret_cast<std::uintptr_t>(in), b = reinterpret_cast<std::uintptr_t>(out);
  if (a < b + count * out_size && b < a + count * in_size) {
    return {errc::invalid_argument, what + ": in at " + pointer_text(in) + " (" +
                                        std::to_string(count * in_size) + " bytes) and out at " +
                                        pointer_text(out) + " (" +
                                        std::to_string(count * out_size) + " bytes) overlap"};
  }
  if (from == dtype::f32) {
    return to == dtype::f16 ? launch_narrow<to_f16>(what, in, out, count, stream)
                            : launch_narrow<to_bf16>(what, in, out, count, stream);
  }
  return from == dtype::f16 ? launch_widen<from_f16>(what, in, out, count, stream)
                            : launch_widen<from_bf16>(what, in, out, count, stream);
}

status count_nonfinite(const void* data, dtype t, std::size_t count,
                       unsigned long long* counter, cudaStream_t stream) {
  const std::string what = "gpu::count_nonfinite of " + std::to_string(count) + " " +
                           std::string(name_of(t)) + " elements";
  switch (t) {
    case dtype::i32: case dtype::i64: case dtype::u8: case dtype::i8: case dtype::i16: case dtype::boolean:
      return {};  // integers hold no NaN or infinity
    case dtype::f16: case dtype::bf16: case dtype::f32: case dtype::f64:
      break;
    default:
      return {errc::invalid_argument,
              "gpu::count_nonfinite: unknown dtype " + std::to_string(int(t))};
  }
  if (status st = check_buffer(what, "data", data, size_of(t), count); !st) return st;
  if (status st = check_buffer(what, "counter", counter, sizeof *counter, count); !st) return st;
  if (count == 0) return {};
  switch (t) {
    case dtype::f16: return launch_count<half_check<0x7c00>>(what, data, count, counter, stream);
    case dtype::bf16: return launch_count<half_check<0x7f80>>(what, data, count, counter, stream);
    case dtype::f32: return launch_count<f32_check>(what, data, count, counter, stream);
    default: return launch_count<f64_check>(what, data, count, counter, stream);
  }
}

}  // namespace chorus::gpu
