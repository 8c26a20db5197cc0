// chorus-bench autotune (compiled only with CHORUS_WITH_PIPELINE): the autotuner against a grid
// of fixed configurations on the ResNet-50 pipeline workload, in one job (docs/autotune.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace chorus {
struct process_env;
}

namespace chorus::bench {

struct autotune_bench_options {
  int steps = 10;                              ///< --steps: timed steps of the start and after a retune
  int grid_steps = 3;                          ///< --grid-steps: timed steps per grid point (after 1 warm-up)
  int max_steps = 600;                         ///< --max-steps: the tuned run's cap before it converges
  int cost_steps = 20;                         ///< --cost-steps: converged steps, tuned and then fixed
  std::chrono::microseconds compute{0};        ///< --compute-us: busy work before each tensor
  std::vector<std::size_t> grid_streams = {1, 2, 4, 8};             ///< --grid-streams
  std::vector<std::size_t> grid_chunks = {256u << 10, 1u << 20, 4u << 20};   ///< --grid-chunks
  std::vector<std::size_t> grid_fusion = {1u << 20, 8u << 20, 64u << 20};    ///< --grid-fusion
  /// --retune-signal: a file rank 0 creates to ask the harness to change the network midway
  /// (it removes the file when done); empty: no change, no RESULT autotune_retune.
  std::string retune_signal;
};

/// Runs the benchmark on one pipeline (the fixed blocks with its autotuner held, the tuned
/// blocks with it resumed) and prints, on rank 0, RESULT autotune, autotune_cost and (with retune_signal)
/// autotune_retune (see the .cpp).
int run_autotune_bench(const process_env& env, const autotune_bench_options& o);

}  // namespace chorus::bench
