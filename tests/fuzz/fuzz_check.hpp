// One helper for the fuzz targets: an invariant a target checks on what a parser accepted.
// A broken one prints what differed and aborts, which libFuzzer reports as a crash and saves
// the input (release builds too: no assert()).
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHORUS_FUZZ_CHECK(cond, what)                                               \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "fuzz invariant failed: %s (%s) at %s:%d\n", what, #cond, \
                   __FILE__, __LINE__);                                             \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
