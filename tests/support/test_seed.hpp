// Seeds of the randomised tests: one base per process, printed once, overridden by
// CHORUS_TEST_SEED=<n> so a failing run can be repeated.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace chorus::testing {

/// The process's base seed: CHORUS_TEST_SEED, else `fallback`; printed with `who` once.
inline uint64_t base_seed(const char* who, uint64_t fallback) {
  static const uint64_t seed = [&] {
    const char* env = std::getenv("CHORUS_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 0) : fallback;
    std::printf("%s seed=%llu (set CHORUS_TEST_SEED to repeat)\n", who, static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

/// A seed per test case, derived from the base and a case-specific salt; printed.
inline uint64_t seed_for(const char* who, uint64_t salt) {
  const uint64_t seed = base_seed(who, 0x5eed) * 0x9e3779b97f4a7c15ull + salt;
  std::printf("seed=%llu (salt %llu)\n", static_cast<unsigned long long>(seed), static_cast<unsigned long long>(salt));
  return seed;
}

}  // namespace chorus::testing
