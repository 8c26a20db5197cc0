// One autotune window of a rank: the bytes of the buckets it finished, over the wall time
// between two of those buckets. Where a window ends decides what its score measures. A window
// cut after a number of cycles starts and ends anywhere in a training step: with ResNet-50's
// 5.7 cycles per step and 20-cycle windows, each window held 3.5 steps, and the phase of the
// step where it began moved its score by up to 10% between two windows of one setting, more
// than the differences the search must see.
//
// So a window counts training steps, as Horovod's autotuner does (its counts of tensor names):
// a step has passed when a tensor finishes again. The window ends at the bucket in which some
// tensor finishes for the (steps + 1)-th time since the window began, so it spans `steps` whole
// steps and starts where the previous one ended, at the same point of a step. Its bytes are
// those of the buckets after its first (which ended the window before) up to that bucket.
// Until a name has come round (a job's first step), steps cannot be counted and no window ends:
// windows of cycles there began and ended inside the first step, and one measured twice the
// score of its setting. restart() keeps what was learnt. A job whose
// tensor names never come round (every name new) has no steps at all: after
// `names_before_cycles` names without one coming round, a window ends after `steps` distinct
// cycles with finished buckets (the rule before steps), until a name does come round. Counting
// steps, a window also ends after cycle_cap x `steps` such cycles (should names stop coming
// round).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace chorus::tuning {

class window_meter {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  /// A window that counts steps ends, whatever else, after this many times `steps` cycles.
  static constexpr uint64_t cycle_cap = 1000;

  /// Names without one coming round after which a job is taken to have no steps.
  static constexpr std::size_t default_names_before_cycles = 4096;

  explicit window_meter(int steps, std::size_t names_before_cycles = default_names_before_cycles)
      : steps_(steps < 1 ? 1 : static_cast<uint64_t>(steps)), names_before_cycles_(names_before_cycles) {}

  /// A finished bucket: its agreed cycle, bytes, when it finished and its tensors (ids of their
  /// names). The window's score (bytes per second) when this bucket ends it; the next window
  /// then starts at this bucket.
  std::optional<double> add(uint64_t cycle, uint64_t bytes, time_point at, const std::vector<uint64_t>& tensors);
  /// Forgets the window in progress (a hold, a resume): the next bucket starts a new one. What
  /// was learnt of the job (whether its names come round) stays.
  void restart();
  enum class rule { unknown, steps, cycles };
  /// How windows end: not yet (no name has come round yet), by steps, or by cycles (a job of
  /// ever-new names).
  rule cuts_by() const { return rule_; }

 private:
  void begin(uint64_t cycle, time_point at, const std::vector<uint64_t>& tensors);
  /// Notes whether one of `tensors` was seen before (then windows count steps from now on), or
  /// that too many names were new to wait for one any longer (windows of cycles).
  void learn(const std::vector<uint64_t>& tensors);

  uint64_t steps_;
  std::size_t names_before_cycles_;
  bool started_ = false;
  rule rule_ = rule::unknown;
  time_point start_{};
  uint64_t bytes_ = 0;
  uint64_t cycles_ = 0;  // distinct cycles of the buckets after the first
  uint64_t last_cycle_ = 0;
  std::unordered_map<uint64_t, uint64_t> seen_;  // times each tensor finished in this window
  // Until a name has come round: the names seen so far (forgotten past known_limit, so a job
  // of ever-new names holds no more).
  std::unordered_set<uint64_t> known_;
  static constexpr std::size_t known_limit = 1 << 16;
};

/// The id of a tensor name for window_meter::add.
uint64_t tensor_id(const std::string& name);

}  // namespace chorus::tuning
