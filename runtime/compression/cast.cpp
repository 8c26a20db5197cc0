// Compression casts and the NaN/Inf scan. Each call checks its arguments, then runs blocked
// loops: a block of the caller's floats is loaded into a stack array of f32 (rounded from f64,
// scaled, checked for NaN/Inf on the way), then converted to or from the 16-bit wire format by
// a codec. The loops are compiled three times (baseline, AVX2 + F16C, AVX-512) and one set is
// picked per process from CPUID; the portable f16 conversions (half.hpp) agree with F16C bit
// for bit, and the file is built without FMA contraction, so every set gives identical bits.
#include "runtime/compression/cast.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/core/half.hpp"
#include "runtime/core/kernel_build.hpp"
#include "runtime/core/cpu_features.hpp"
#include "runtime/core/log.hpp"
#include "runtime/compression/f16_codec.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CHORUS_CAST_X86 1
#endif

namespace chorus {

dtype wire_dtype(compression c) {
  return c == compression::fp16 ? dtype::f16 : c == compression::bf16 ? dtype::bf16 : dtype::f32;
}

namespace {

constexpr std::size_t block = 256;  // elements per stack block (1 KiB of f32)

// ---- codecs: n wire values <-> n f32 ------------------------------------------------------

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
struct scalar_codec {
  static void widen(float* __restrict to, const byte* __restrict from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) to[i] = Widen(load<uint16_t>(from + 2 * i));
  }
  static void narrow(byte* __restrict to, const float* __restrict from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) store<uint16_t>(to + 2 * i, Narrow(from[i]));
  }
};
using f16_portable = scalar_codec<f16_to_f32, f32_to_f16>;
using bf16_portable = scalar_codec<bf16_to_f32, f32_to_bf16>;

#ifdef CHORUS_CAST_X86
// GCC 12 warns that the AVX-512 conversion intrinsics read an uninitialised register (their
// own _mm256_undefined_si256 pass-through operand, which the unmasked forms never read).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
struct f16_avx512 {
  [[gnu::target("avx512f,avx2,f16c")]] static void widen(float* __restrict to, const byte* __restrict from,
                                                         std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(to + i,
                       _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i_u*>(from + 2 * i))));
    for (; i < n; ++i) to[i] = f16_to_f32(load<uint16_t>(from + 2 * i));
  }
  [[gnu::target("avx512f,avx2,f16c")]] static void narrow(byte* __restrict to, const float* __restrict from,
                                                          std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i_u*>(to + 2 * i),
                          _mm512_cvtps_ph(_mm512_loadu_ps(from + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) store<uint16_t>(to + 2 * i, f32_to_f16(from[i]));
  }
};
#endif

using portable_flavor = flavor<f16_portable, bf16_portable>;

// ---- the caller's side: load (round, scale, check) and store ------------------------------

// 1 when x is NaN or +-Inf: its exponent bits are all ones.
inline uint32_t nonfinite_bit(float x) {
  return uint32_t((std::bit_cast<uint32_t>(x) & 0x7f800000u) == 0x7f800000u);
}
inline uint32_t nonfinite_bit(double x) {
  constexpr uint64_t e = 0x7ff0000000000000ull;
  return uint32_t((std::bit_cast<uint64_t>(x) & e) == e);
}

template <class S>
uint32_t load_scaled(float* __restrict to, const byte* __restrict from, std::size_t n, float scale) {
  uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const S x = load<S>(from + i * sizeof(S));
    bad |= nonfinite_bit(x);
    to[i] = float(x) * scale;
  }
  return bad;
}

template <class D>
void store_widened(byte* __restrict to, const float* __restrict from, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) store<D>(to + i * sizeof(D), D(from[i]));
}

// ---- loops over blocks --------------------------------------------------------------------

template <class Codec, class S>
bool narrow_loop(byte* to, const byte* from, std::size_t n, float scale) {
  float f[block];
  uint32_t bad = 0;
  for (std::size_t i = 0; i < n; i += block) {
    const std::size_t m = std::min(block, n - i);
    bad |= load_scaled<S>(f, from + i * sizeof(S), m, scale);
    Codec::narrow(to + 2 * i, f, m);
  }
  return bad != 0;
}

template <class Codec, class D>
void widen_loop(byte* to, const byte* from, std::size_t n) {
  float f[block];
  for (std::size_t i = 0; i < n; i += block) {
    const std::size_t m = std::min(block, n - i);
    Codec::widen(f, from + 2 * i, m);
    store_widened<D>(to + i * sizeof(D), f, m);
  }
}

// The whole block of `own` is read before the block of `acc` is written, so acc may be own.
template <class Codec, class S>
bool accumulate_loop(float* acc, const byte* own, float scale, const byte* recv, std::size_t n) {
  float f[block];
  float g[block];
  uint32_t bad = 0;
  for (std::size_t i = 0; i < n; i += block) {
    const std::size_t m = std::min(block, n - i);
    bad |= load_scaled<S>(f, own + i * sizeof(S), m, scale);
    Codec::widen(g, recv + 2 * i, m);
    for (std::size_t j = 0; j < m; ++j) f[j] = f[j] + g[j];
    std::memcpy(acc + i, f, m * sizeof(float));
  }
  return bad != 0;
}

template <class T>
bool nonfinite_loop(const byte* data, std::size_t n) {
  uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad |= nonfinite_bit(load<T>(data + i * sizeof(T)));
  return bad != 0;
}

// Bit 0: a dst[i] was NaN/Inf before the add; bit 1: a src[i] was.
template <class T>
uint32_t add_checked_loop(byte* dst, const byte* src, std::size_t n) {
  uint32_t bad = 0, bad_src = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T d = load<T>(dst + i * sizeof(T)), s = load<T>(src + i * sizeof(T));
    bad |= nonfinite_bit(d);
    bad_src |= nonfinite_bit(s);
    store<T>(dst + i * sizeof(T), d + s);
  }
  return (bad != 0 ? 1u : 0u) | (bad_src != 0 ? 2u : 0u);
}

// x - x is +0 (bits 0) for every finite x and NaN otherwise: ORing those bits is a check that
// vectorises into one subtraction and one OR per element.
template <class T, class U>
bool add_check_sum_loop(byte* dst, const byte* src, std::size_t n) {
  U bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T r = load<T>(dst + i * sizeof(T)) + load<T>(src + i * sizeof(T));
    bad |= std::bit_cast<U>(T(r - r));
    store<T>(dst + i * sizeof(T), r);
  }
  return bad != 0;
}

bool add_check_sum_any(void* dst, const void* src, dtype t, std::size_t n) {
  auto* d = static_cast<byte*>(dst);
  const auto* s = static_cast<const byte*>(src);
  return t == dtype::f32 ? add_check_sum_loop<float, uint32_t>(d, s, n) : add_check_sum_loop<double, uint64_t>(d, s, n);
}

uint32_t add_checked_any(void* dst, const void* src, dtype t, std::size_t n) {
  auto* d = static_cast<byte*>(dst);
  const auto* s = static_cast<const byte*>(src);
  return t == dtype::f32 ? add_checked_loop<float>(d, s, n) : add_checked_loop<double>(d, s, n);
}

inline bool nonfinite_half(const byte* data, std::size_t n, uint16_t exponent) {
  uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad |= uint32_t((load<uint16_t>(data + 2 * i) & exponent) == exponent);
  return bad != 0;
}

// ---- dispatch on (compression, dtype) -----------------------------------------------------

template <class Flavor>
bool narrow_flavor(void* to, compression c, const void* from, dtype src, std::size_t n, float scale) {
  auto* o = static_cast<byte*>(to);
  const auto* i = static_cast<const byte*>(from);
  if (c == compression::fp16)
    return src == dtype::f32 ? narrow_loop<typename Flavor::f16, float>(o, i, n, scale)
                             : narrow_loop<typename Flavor::f16, double>(o, i, n, scale);
  return src == dtype::f32 ? narrow_loop<typename Flavor::bf16, float>(o, i, n, scale)
                           : narrow_loop<typename Flavor::bf16, double>(o, i, n, scale);
}

template <class Flavor>
void widen_flavor(void* to, dtype dst, const void* from, compression c, std::size_t n) {
  auto* o = static_cast<byte*>(to);
  const auto* i = static_cast<const byte*>(from);
  if (c == compression::fp16)
    return dst == dtype::f32 ? widen_loop<typename Flavor::f16, float>(o, i, n)
                             : widen_loop<typename Flavor::f16, double>(o, i, n);
  return dst == dtype::f32 ? widen_loop<typename Flavor::bf16, float>(o, i, n)
                           : widen_loop<typename Flavor::bf16, double>(o, i, n);
}

template <class Flavor>
bool accumulate_flavor(float* acc, const void* own, dtype src, float scale, const void* recv, compression c,
                       std::size_t n) {
  const auto* o = static_cast<const byte*>(own);
  const auto* r = static_cast<const byte*>(recv);
  if (c == compression::fp16)
    return src == dtype::f32 ? accumulate_loop<typename Flavor::f16, float>(acc, o, scale, r, n)
                             : accumulate_loop<typename Flavor::f16, double>(acc, o, scale, r, n);
  return src == dtype::f32 ? accumulate_loop<typename Flavor::bf16, float>(acc, o, scale, r, n)
                           : accumulate_loop<typename Flavor::bf16, double>(acc, o, scale, r, n);
}

bool nonfinite_any(const void* data, dtype t, std::size_t n) {
  const auto* d = static_cast<const byte*>(data);
  switch (t) {
    case dtype::f16: return nonfinite_half(d, n, 0x7c00);
    case dtype::bf16: return nonfinite_half(d, n, 0x7f80);
    case dtype::f32: return nonfinite_loop<float>(d, n);
    case dtype::f64: return nonfinite_loop<double>(d, n);
    default: return false;
  }
}

bool nonfinite_portable(const void* d, dtype t, std::size_t n) { return nonfinite_any(d, t, n); }
uint32_t add_checked_portable(void* d, const void* s, dtype t, std::size_t n) { return add_checked_any(d, s, t, n); }
bool add_check_sum_portable(void* d, const void* s, dtype t, std::size_t n) { return add_check_sum_any(d, s, t, n); }

const cast_detail::kernels portable_kernels{"portable",
                                            narrow_flavor<portable_flavor>,
                                            widen_flavor<portable_flavor>,
                                            accumulate_flavor<portable_flavor>,
                                            nonfinite_portable,
                                            add_checked_portable,
                                            add_check_sum_portable};

#ifdef CHORUS_CAST_X86
// `flatten` inlines every loop above into these entry points, so they are compiled for the
// entry point's ISA while the baseline copies stay as they are.
#define CHORUS_CAST_FLAVOR(NAME, TARGET, FLAVOR)                                                                  \
  [[gnu::target(TARGET), gnu::flatten]] bool NAME##_narrow(void* to, compression c, const void* from, dtype src,  \
                                                           std::size_t n, float scale) {                          \
    return narrow_flavor<FLAVOR>(to, c, from, src, n, scale);                                                     \
  }                                                                                                               \
  [[gnu::target(TARGET), gnu::flatten]] void NAME##_widen(void* to, dtype dst, const void* from, compression c,   \
                                                          std::size_t n) {                                        \
    widen_flavor<FLAVOR>(to, dst, from, c, n);                                                                    \
  }                                                                                                               \
  [[gnu::target(TARGET), gnu::flatten]] bool NAME##_accumulate(float* acc, const void* own, dtype src,            \
                                                               float scale, const void* recv, compression c,      \
                                                               std::size_t n) {                                   \
    return accumulate_flavor<FLAVOR>(acc, own, src, scale, recv, c, n);                                           \
  }                                                                                                               \
  [[gnu::target(TARGET), gnu::flatten]] bool NAME##_nonfinite(const void* d, dtype t, std::size_t n) {            \
    return nonfinite_any(d, t, n);                                                                                \
  }                                                                                                               \
  [[gnu::target(TARGET), gnu::flatten]] uint32_t NAME##_add_checked(void* d, const void* s, dtype t,             \
                                                                   std::size_t n) {                               \
    return add_checked_any(d, s, t, n);                                                                           \
  }                                                                                                               \
  [[gnu::target(TARGET), gnu::flatten]] bool NAME##_add_check_sum(void* d, const void* s, dtype t,               \
                                                                  std::size_t n) {                                \
    return add_check_sum_any(d, s, t, n);                                                                         \
  }

using avx2_flavor = flavor<f16c_codec, bf16_portable>;
using avx512_flavor = flavor<f16_avx512, bf16_portable>;
CHORUS_CAST_FLAVOR(avx2, "avx2,f16c", avx2_flavor)
CHORUS_CAST_FLAVOR(avx512, "avx512f,avx512bw,avx512vl,avx2,f16c", avx512_flavor)
#undef CHORUS_CAST_FLAVOR

#pragma GCC diagnostic pop

#endif

// The flavours this CPU runs, portable first, best last.
struct flavour_table {
  cast_detail::kernels k[3];
  std::size_t n = 0;
};

const flavour_table& table() {
  static const flavour_table t = [] {
    flavour_table out;
    out.k[out.n++] = portable_kernels;
#ifdef CHORUS_CAST_X86
    if (cpu_has_avx2_f16c()) {
      out.k[out.n++] = {"avx2+f16c",     avx2_narrow,      avx2_widen,      avx2_accumulate,
                        avx2_nonfinite,  avx2_add_checked, avx2_add_check_sum};
      if (cpu_has_avx512_bw_vl())
        out.k[out.n++] = {"avx512",          avx512_narrow,      avx512_widen,        avx512_accumulate,
                          avx512_nonfinite,  avx512_add_checked, avx512_add_check_sum};
    }
#endif
    return out;
  }();
  return t;
}

// The best build this CPU has, or the portable loops where runtime/config asked for them
// (CHORUS_REDUCE_KERNELS=portable).
const cast_detail::kernels& selected() {
  const auto& t = table();
  return portable_kernels_forced() ? t.k[0] : t.k[t.n - 1];
}

// ---- invariant checks ---------------------------------------------------------------------

[[noreturn]] void invariant_failed(const std::string& what) {
  log::write(log::level::error, "cast", what);
  std::abort();
}

void check_wire(const char* fn, compression c) {
  if (c != compression::fp16 && c != compression::bf16)
    invariant_failed(std::string(fn) + ": compression=" + std::to_string(int(c)) + "; expected fp16 or bf16");
}
void check_float(const char* fn, dtype t) {
  if (t != dtype::f32 && t != dtype::f64)
    invariant_failed(std::string(fn) + ": dtype=" + std::to_string(int(t)) + "; expected f32 or f64");
}
void check_pointer(const char* fn, const char* what, const void* p, std::size_t n) {
  if (p == nullptr && n > 0)
    invariant_failed(std::string(fn) + ": " + what + " is null with count=" + std::to_string(n));
}

}  // namespace

bool narrow_to_wire(void* to, compression c, const void* from, dtype src, std::size_t n, float scale) {
  check_wire("narrow_to_wire", c);
  check_float("narrow_to_wire", src);
  check_pointer("narrow_to_wire", "output", to, n);
  check_pointer("narrow_to_wire", "input", from, n);
  return n > 0 && selected().narrow(to, c, from, src, n, scale);
}

void widen_from_wire(void* to, dtype dst, const void* from, compression c, std::size_t n) {
  check_wire("widen_from_wire", c);
  check_float("widen_from_wire", dst);
  check_pointer("widen_from_wire", "output", to, n);
  check_pointer("widen_from_wire", "input", from, n);
  if (n > 0) selected().widen(to, dst, from, c, n);
}

bool accumulate_wire(float* acc, const void* own, dtype src, float scale, const void* recv, compression c,
                     std::size_t n) {
  check_wire("accumulate_wire", c);
  check_float("accumulate_wire", src);
  check_pointer("accumulate_wire", "accumulator", acc, n);
  check_pointer("accumulate_wire", "own input", own, n);
  check_pointer("accumulate_wire", "received input", recv, n);
  return n > 0 && selected().accumulate(acc, own, src, scale, recv, c, n);
}

bool add_checked(void* dst, const void* src, dtype t, std::size_t n) { return (add_checked_both(dst, src, t, n) & 1u) != 0; }

uint32_t add_checked_both(void* dst, const void* src, dtype t, std::size_t n) {
  check_float("add_checked", t);
  check_pointer("add_checked", "output", dst, n);
  check_pointer("add_checked", "input", src, n);
  return n > 0 ? selected().add_checked(dst, src, t, n) : 0u;
}

bool add_check_sum(void* dst, const void* src, dtype t, std::size_t n) {
  check_float("add_check_sum", t);
  check_pointer("add_check_sum", "output", dst, n);
  check_pointer("add_check_sum", "input", src, n);
  return n > 0 && selected().add_check_sum(dst, src, t, n);
}

bool has_nonfinite(const void* data, dtype t, std::size_t n) {
  check_pointer("has_nonfinite", "data", data, n);
  return n > 0 && selected().nonfinite(data, t, n);
}

std::string_view cast_kernels_name() { return selected().name; }

const cast_detail::kernels* cast_detail::available(std::size_t& count) {
  count = table().n;
  return table().k;
}

}  // namespace chorus
