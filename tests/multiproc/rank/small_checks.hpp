// chorus-testrank's small allreduces on the calling thread (runtime/collectives/mailbox_allreduce.hpp):
// the loop the failure tests kill a rank in, and the size mismatch every rank must catch.
#pragma once

#include "runtime/collectives/communicator.hpp"

namespace chorus::testrank {

/// small-loop SECS: 4 KiB f32 sums until SECS pass, each checked; prints "small on caller: yes|no"
/// first, then "iteration N" for the first ten and every thousandth. CHORUS_TEST_KILL="R:I": rank
/// R SIGKILLs itself instead of starting iteration I, so the others wait in that allreduce.
status run_small_loop(communicator& c, int seconds);
/// small-mismatch: rank r allreduces 1024 + 256 r floats (all within the caller's path).
status run_small_mismatch(communicator& c);

}  // namespace chorus::testrank
