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
    const uint64_t wait = static_cast<uint64_t>(probe_after) << std::min<uint32_t>(s.backoff, 31);
    if (s.outstanding != 0 || s.passed_over < wait) continue;
    s.passed_over = 0;
    if (s.rate >= fastest) continue;
    s.rate = std::min(fastest, std::max(s.rate * 2, fastest / 4));
    s.guessed = true;
    ++raised;
  }
  return raised;
}

void measured_rate(std::vector<stream_view>& streams, std::size_t i, double sample, double weight,
                   uint32_t max_backoff) {
  double fastest_other = 0;
  for (std::size_t j = 0; j < streams.size(); ++j)
    if (j != i) fastest_other = std::max(fastest_other, streams[j].rate);
  auto& s = streams[i];
  const bool slow = sample < fastest_other / 2;
  if (!slow) s.backoff = 0;
  else if (s.guessed) s.backoff = std::min(s.backoff + 1, max_backoff);
  s.rate = s.guessed ? sample : blend_rate(s.rate, sample, weight);
  s.guessed = false;
}

}  // namespace chorus
