// `chorus-bench allgather`: communicator::allgather of float32 blocks, the hierarchy left to
// CHORUS_HIERARCHICAL (chorus_allgather_tcp), forced on (chorus_hier_allgather_tcp) and forced
// off (chorus_flat_allgather_tcp), sizes interleaved so all three see the same noise.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/collectives/communicator.hpp"

namespace chorus::bench {

/// `sizes` are result bytes (every rank gives bytes / N, whole floats). The protocol of
/// allreduce_protocol.hpp (3 warm-ups, clamp(512 MiB / bytes, 5, 200) timed iterations each after
/// a barrier, time = max over ranks, every result checked) with busbw = (N-1)/N * bytes / time,
/// printed as "RESULT <name> N bytes iters median_us min_us busbw busbw_at_min" on rank 0.
int run_allgather_bench(communicator& c, const std::vector<std::size_t>& sizes);

}  // namespace chorus::bench
