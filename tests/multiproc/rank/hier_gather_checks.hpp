// chorus-testrank's hierarchical allgather checks (hier_gather_checks.cpp): exact results of
// communicator::allgather forced hierarchical and under auto, and the loop a killed rank dies in.
#pragma once

#include <cstddef>

#include "runtime/collectives/communicator.hpp"

namespace chorus::testrank {

/// Prints what auto runs for an allgather, then checks allgathers forced hierarchical and under
/// auto: every dtype, per-rank counts all 0, all 1, odd and differing (some 0), and several
/// chunks (counts differing too), against what every rank computes from every rank's seed.
status check_hier_allgather(communicator& c);
/// One forced-hierarchical f32 allgather of `count` elements per rank, spot-checked.
status hier_allgather_once(communicator& c, std::size_t count, int iteration);
/// Starts a forced-hierarchical allgather as hier_allgather_once(c, 1 << 20, iteration) would,
/// lets it run a moment, then SIGKILLs this process.
[[noreturn]] void die_during_allgather(communicator& c, int iteration);

}  // namespace chorus::testrank
