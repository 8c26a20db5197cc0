// chorus-testrank's hierarchical allreduce checks (hier_checks.cpp) and the fake hosts of the
// multi-process tests (CHORUS_TEST_HOSTS).
#pragma once

#include <cstddef>

#include "runtime/collectives/communicator.hpp"

namespace chorus::testrank {

/// CHORUS_TEST_HOSTS="2,1": ranks 0-1 get CHORUS_HOST_ID testhost-0, rank 2 testhost-1. Call
/// before the communicator reads its configuration. Unset: nothing changes.
void apply_test_hosts(int rank);
/// Prints the host groups and auto's choices, then checks hierarchical (forced) and auto
/// allreduces of every dtype and reduce op, sizes 0, 1, 7, 1001 and several chunks.
status check_hierarchical(communicator& c);
/// One forced-hierarchical f32 sum of `count` elements, spot-checked; for the failure loop.
status hier_allreduce_once(communicator& c, std::size_t count, int iteration);
/// CHORUS_TEST_KILL="R:I": I on rank R, else -1.
int self_kill_iteration(int rank);
/// Lets the operation just started run a moment, says so ("killing myself in the middle of
/// <what>"), then SIGKILLs this process.
[[noreturn]] void die_soon(const char* what);
/// Starts a forced-hierarchical 4 MiB allreduce, as hier_allreduce_once(c, 1 << 20, iteration)
/// would (the same values: where it finishes its part before the kill, the survivors that
/// complete the op get the right sum), lets it run a moment, then SIGKILLs this process.
[[noreturn]] void die_during_allreduce(communicator& c, int iteration);

}  // namespace chorus::testrank
