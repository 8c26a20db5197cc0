// The pipeline benchmark (compiled only with CHORUS_WITH_PIPELINE).
#pragma once

#include <chrono>

namespace chorus {
class communicator;
}

namespace chorus::bench {

/// Runs 3 warm-up and `steps` timed steps of ResNet-50 gradients; prints the RESULT line on rank 0.
int run_pipeline_bench(communicator& comm, int steps, std::chrono::microseconds compute_per_tensor);

}  // namespace chorus::bench
