// The pipeline benchmark (compiled only with CHORUS_WITH_PIPELINE).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives/communicator.hpp"

namespace chorus::bench {

/// Runs 3 warm-up and `steps` timed steps of ResNet-50 gradients; prints the RESULT line on rank 0.
/// Each name in `variants` ("metrics") adds as many steps with that telemetry on, interleaved
/// with the plain ones in the same pipeline, and a RESULT line whose second word is
/// pipeline_<variant>.
int run_pipeline_bench(communicator& comm, std::shared_ptr<tcp::control_link> control, int steps, std::chrono::microseconds compute_per_tensor,
                       const std::vector<std::string>& variants = {});

}  // namespace chorus::bench
