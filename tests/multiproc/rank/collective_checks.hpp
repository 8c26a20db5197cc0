// The checks chorus-testrank runs inside each rank: every collective with exact expected
// results computed locally from the same formulas every rank uses.
#pragma once

#include <string>

#include "runtime/collectives/communicator.hpp"

namespace chorus::testrank {

/// Every collective, sizes 0, 1, odd, 4 KiB and 16 MiB. Returns the first mismatch or error.
status check_all_collectives(communicator& comm);
/// A few small and mid-sized collectives (up to 1 MiB), each algorithm once: for jobs of many ranks.
status check_few_collectives(communicator& comm);
/// One 16 MiB f32 sum allreduce with verification; used by the failure tests' loops.
status allreduce_16mib_once(communicator& comm, int iteration);

}  // namespace chorus::testrank
