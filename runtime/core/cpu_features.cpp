// CPU feature checks for the kernel dispatch (cpu_features.hpp).
#include "runtime/core/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CHORUS_CPU_X86 1
#endif

namespace chorus {

bool cpu_has_avx2_f16c() {
#ifdef CHORUS_CPU_X86
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
#else
  return false;
#endif
}

bool cpu_has_avx512_bw_vl() {
#ifdef CHORUS_CPU_X86
  return cpu_has_avx2_f16c() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

}  // namespace chorus
