// Earliest-expected-finish placement of chunks on streams, rate averaging and idle-stream probing.
#include "runtime/collectives/stream_placement.hpp"

#include <algorithm>

namespace chorus {

std::size_t pick_stream(const std::vector<stream_view>& streams, std::size_t bytes) {
  std::size_t best = 0;
  double best_finish = 0;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const auto& s = streams[i];
    double finish = static_cast<double>(s.outstanding + bytes) / std::max(s.rate, 1.0);
    if (i == 0 || finish < best_finish) {
      best = i;
      best_finish = finish;
    }
  }
  return best;
}

double blend_rate(double old_rate, double sample, double weight) {
  return old_rate + weight * (sample - old_rate);
}

std::size_t age_idle_streams(std::vector<stream_view>& streams, uint32_t probe_after) {
  double fastest = 0;
  for (const auto& s : streams) fastest = std::max(fastest, s.rate);
  std::size_t raised = 0;
  for (auto& s : streams) {
    if (s.outstanding != 0 || s.passed_over < probe_after) continue;
    s.passed_over = 0;
    if (s.rate >= fastest) continue;
    s.rate = std::min(fastest, std::max(s.rate * 2, fastest / 4));
    ++raised;
  }
  return raised;
}

}  // namespace chorus
