// Which x86 vector extensions this CPU and OS offer, asked once for every kernel family (the
// reduce kernels, the compression casts). False everywhere off x86.
#pragma once

namespace chorus {

/// AVX2 with the OS saving YMM registers, and F16C (CPUID.1:ECX bit 29, asked directly: not
/// every compiler's __builtin_cpu_supports knows it).
bool cpu_has_avx2_f16c();
/// AVX-512 F, BW and VL (and AVX2+F16C).
bool cpu_has_avx512_bw_vl();

}  // namespace chorus
