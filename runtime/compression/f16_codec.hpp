// Unaligned element access and the 16-bit float pieces that both the compression casts
// (cast.cpp) and the reduction kernels (runtime/collectives/reduce.cpp) build their loops from.
// Unnamed namespace: each of those files compiles its loops with flags of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/core/half.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CHORUS_F16C_CODEC 1
#endif

namespace chorus {
namespace {

// Buffers are bytes at any alignment; elements are read and written with memcpy, which GCC
// turns into plain (unaligned) vector loads and stores inside the loops.
using byte = unsigned char;

template <class T>
T load(const byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void store(byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

#ifdef CHORUS_F16C_CODEC
// F16C converts eight values per instruction; the portable functions (which agree bit for bit)
// take the tail. `block`: the stack block length (elements) the reduction kernels use with it.
struct f16c_codec {
  static constexpr std::size_t block = 64;
  [[gnu::target("avx2,f16c")]] static void widen(float* __restrict to, const byte* __restrict from, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i_u*>(from + 2 * i))));
    for (; i < n; ++i) to[i] = f16_to_f32(load<uint16_t>(from + 2 * i));
  }
  [[gnu::target("avx2,f16c")]] static void narrow(byte* __restrict to, const float* __restrict from, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i_u*>(to + 2 * i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(from + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) store<uint16_t>(to + 2 * i, f32_to_f16(from[i]));
  }
};
#endif

// A flavor names the two 16-bit codecs; everything else is the same source, compiled for the
// flavor's ISA.
template <class F16, class BF16>
struct flavor {
  using f16 = F16;
  using bf16 = BF16;
};

}  // namespace
}  // namespace chorus
