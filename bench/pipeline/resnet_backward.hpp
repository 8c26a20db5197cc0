// One ResNet-50 backward pass through the actor pipeline: the workload of `chorus-bench
// pipeline` and `chorus-bench autotune`. Its 161 gradients are enqueued output layer first, each
// after `compute` of busy work (the layer's own backward), as average allreduces in place.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "chorus/types.hpp"  // compression, nan_check

namespace chorus {
class pipeline;
}

namespace chorus::bench {

/// Enqueues gradient k at grads + offset[k] (resnet50_sizes[k] floats; offset has one entry per
/// tensor and one past the end), waits until every one completed, and returns the wall time in
/// milliseconds on this rank. Throws std::runtime_error with the first failure. `wire` and
/// `check`: every gradient asks for that compression and NaN/Inf check (a job's settings).
double resnet_backward_step(pipeline& pipe, float* grads, const std::vector<std::size_t>& offset,
                            std::chrono::microseconds compute, compression wire = compression::none,
                            nan_check check = nan_check::off);

/// Busy work for `d` (a layer's compute, holding the core as a real backward pass does).
void spin_for(std::chrono::microseconds d);

}  // namespace chorus::bench
