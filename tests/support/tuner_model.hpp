// Shared by the autotuner's test files: a smooth model of a job's throughput over the knobs, a
// poor configuration to start from, a small search's options, and feeding a tuner the model's
// scores until it converges.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/tuning/knobs.hpp"
#include "runtime/tuning/tuner.hpp"

namespace chorus::testing {

// A smooth model of throughput over the log-scaled knobs, peaked at `peak` (unit coordinates).
inline double model(const tuning::search_space& s, const tuning::point& p, const std::vector<double>& peak) {
  auto u = s.unit(p);
  const double weight[] = {3.0, 2.0, 1.5, 0.5, 0.5};
  double loss = 0;
  for (std::size_t d = 0; d < u.size(); ++d) loss += weight[d] * (u[d] - peak[d]) * (u[d] - peak[d]);
  return 1e9 * std::exp(-loss);
}

inline tuning::knob_values poor_start() {
  tuning::knob_values v;
  v.streams = 1;
  v.chunk_bytes = 256u << 10;
  v.fusion_threshold = 1u << 20;
  return v;
}

/// A search of 12 samples on the model, `windows` windows per sample, no settling.
inline tuning::tuner_options small_search(uint64_t seed, int windows) {
  tuning::tuner_options o;
  o.search.seed = seed;
  o.search.max_samples = 12;
  o.windows_per_sample = windows;
  o.settle_windows = 0;
  return o;
}

/// Feeds `t` the model's scores until it converges; whether it did within `limit` windows.
inline bool converge(tuning::tuner& t, const tuning::search_space& s, const std::vector<double>& peak, int limit) {
  for (int w = 0; w < limit && t.phase() != tuning::tuner_phase::watching; ++w)
    t.on_window(model(s, t.current(), peak));
  return t.phase() == tuning::tuner_phase::watching;
}

/// Where the peak goes when the network changes: fewer streams and larger chunks.
inline const std::vector<double> far_peak{0.3, 0.8, 0.55, 0.3, 0.5};

}  // namespace chorus::testing
