// Autotune windows cut at whole training steps (window_meter.hpp).
#include "runtime/tuning/window_meter.hpp"

#include <functional>
#include <string>

namespace chorus::tuning {

uint64_t tensor_id(const std::string& name) { return std::hash<std::string>{}(name); }

void window_meter::learn(const std::vector<uint64_t>& tensors) {
  if (rule_ == rule::steps) return;
  for (uint64_t t : tensors)
    if (!known_.insert(t).second) rule_ = rule::steps;
  if (rule_ == rule::unknown && known_.size() >= names_before_cycles_) rule_ = rule::cycles;
  if (rule_ == rule::steps || known_.size() > known_limit) known_ = {};
}

void window_meter::begin(uint64_t cycle, time_point at, const std::vector<uint64_t>& tensors) {
  started_ = true;
  start_ = at;
  bytes_ = 0;
  cycles_ = 0;
  last_cycle_ = cycle;
  seen_.clear();
  for (uint64_t t : tensors) ++seen_[t];
}

void window_meter::restart() { started_ = false; }

std::optional<double> window_meter::add(uint64_t cycle, uint64_t bytes, time_point at,
                                        const std::vector<uint64_t>& tensors) {
  learn(tensors);
  if (!started_) {
    begin(cycle, at, tensors);
    return std::nullopt;
  }
  bytes_ += bytes;
  if (cycle != last_cycle_) {
    last_cycle_ = cycle;
    ++cycles_;
  }
  bool whole_steps = false;
  for (uint64_t t : tensors) {
    if (++seen_[t] > steps_) whole_steps = true;
  }
  const bool done = rule_ == rule::steps    ? whole_steps || cycles_ >= cycle_cap * steps_
                    : rule_ == rule::cycles ? cycles_ >= steps_
                                            : false;
  if (!done) return std::nullopt;
  double seconds = std::chrono::duration<double>(at - start_).count();
  double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0.0;
  begin(cycle, at, tensors);
  return score;
}

}  // namespace chorus::tuning
