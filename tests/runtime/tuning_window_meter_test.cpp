// Autotune windows cut at whole training steps (runtime/tuning/window_meter.hpp).
#include "runtime/tuning/window_meter.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace chorus::tuning {
namespace {

using ms = std::chrono::milliseconds;
const window_meter::time_point t0{};

// One training step of a model with six tensors in four buckets, finishing unevenly: bursts
// early in the step, a long wait (the backward pass) before the last bucket.
struct bucket {
  std::vector<std::string> names;
  uint64_t bytes;
  int at_ms;  // within the step
};
const std::vector<bucket> step_buckets{{{"a", "b"}, 40, 10}, {{"c"}, 30, 20}, {{"d", "e"}, 20, 30}, {{"f"}, 10, 90}};
constexpr int step_ms = 100;
constexpr double step_bytes = 100;

std::vector<uint64_t> ids(const std::vector<std::string>& names, const std::string& prefix = "") {
  std::vector<uint64_t> out;
  for (const auto& n : names) out.push_back(tensor_id(prefix + n));
  return out;
}

// Feeds `steps` steps starting at bucket `first` of step 0 (one cycle per bucket); the scores of
// the windows that ended (by steps once counted, else every one). `unique`: every step's names
// are new (no step can be counted).
std::vector<double> run(window_meter& m, int steps, std::size_t first, bool unique = false) {
  std::vector<double> scores;
  uint64_t cycle = 0;
  for (int s = 0; s < steps; ++s)
    for (std::size_t i = s == 0 ? first : 0; i < step_buckets.size(); ++i) {
      const auto& b = step_buckets[i];
      auto at = t0 + ms(s * step_ms + b.at_ms);
      auto score = m.add(++cycle, b.bytes, at, ids(b.names, unique ? std::to_string(s) + "." : ""));
      // In step 0 nothing has come round yet: windows of cycles, which the test leaves out.
      if (score && (m.counts_steps() || unique)) scores.push_back(*score * 1e-3);  // bytes per ms
    }
  return scores;
}

TEST(WindowMeter, AWindowSpansWholeStepsWhereverItBegins) {
  // Whatever bucket of a step the first window starts at, every window holds `steps` whole
  // steps: the same bytes per millisecond, that of a step.
  for (std::size_t first = 0; first < step_buckets.size(); ++first)
    for (int steps : {1, 2, 3}) {
      window_meter m(steps);
      auto scores = run(m, 12, first);
      EXPECT_TRUE(m.counts_steps());
      ASSERT_GE(scores.size(), 12u / steps - 2) << "first bucket " << first << ", " << steps << " steps";
      for (double s : scores) EXPECT_NEAR(s, step_bytes / step_ms, 1e-9) << "first bucket " << first << ", " << steps << " steps";
    }
}

TEST(WindowMeter, WindowsOfCyclesDependOnWhereTheyBeginWhichStepsDoNot) {
  // The same job with every name new each step: no step to count, so windows of 3 cycles (the
  // rule before steps) whose scores swing with the phase of the step they cover.
  window_meter m(3);
  auto scores = run(m, 12, 0, true);
  EXPECT_FALSE(m.counts_steps());
  ASSERT_GE(scores.size(), 10u);
  double lo = scores[0], hi = scores[0];
  for (double s : scores) lo = std::min(lo, s), hi = std::max(hi, s);
  EXPECT_GT(hi / lo, 1.5) << "cycle windows should swing with the phase of the step";
}

TEST(WindowMeter, AJobWhoseNamesNeverComeRoundIsCutByCycles) {
  window_meter m(4);
  uint64_t bytes = 0;
  int ended = 0;
  for (int c = 1; c <= 41; ++c) {
    auto score = m.add(c, 1000, t0 + ms(c), {tensor_id("t" + std::to_string(c))});
    if (c > 1) bytes += 1000;
    if (score) {
      ++ended;
      EXPECT_EQ((c - 1) % 4, 0) << "a window of 4 cycles after the one that began it";
      EXPECT_NEAR(*score, 1000.0 / 1e-3, 1e-6);  // 1000 bytes per ms
    }
  }
  EXPECT_EQ(ended, 10);
  EXPECT_FALSE(m.counts_steps());
}

TEST(WindowMeter, NamesThatStopComingRoundEndAWindowAtTheCycleCap) {
  window_meter m(1);
  run(m, 3, 0);  // names come round: steps are counted
  ASSERT_TRUE(m.counts_steps());
  uint64_t cycle = 1000;
  int ended_after = -1;
  for (int c = 0; c < 1100 && ended_after < 0; ++c)
    if (m.add(++cycle, 1, t0 + ms(1000 + c), {tensor_id("new" + std::to_string(c))})) ended_after = c + 1;
  // The window open when the names changed ends at the cap, 1000 cycles x 1 step.
  EXPECT_GT(ended_after, 0);
  EXPECT_LE(ended_after, static_cast<int>(window_meter::cycle_cap) + 1);
  EXPECT_GE(ended_after, static_cast<int>(window_meter::cycle_cap) - static_cast<int>(step_buckets.size()));
}

TEST(WindowMeter, ARestartForgetsTheWindowInProgress) {
  window_meter m(1);
  auto first = run(m, 2, 0);
  ASSERT_EQ(first.size(), 1u);
  m.restart();
  // The next bucket starts a window; with a long pause before it counted in no window.
  auto late = t0 + ms(10000);
  EXPECT_FALSE(m.add(100, 40, late, ids({"a", "b"})));
  EXPECT_FALSE(m.add(101, 30, late + ms(10), ids({"c"})));
  EXPECT_FALSE(m.add(102, 20, late + ms(20), ids({"d", "e"})));
  EXPECT_FALSE(m.add(103, 10, late + ms(80), ids({"f"})));
  auto score = m.add(104, 40, late + ms(100), ids({"a", "b"}));
  ASSERT_TRUE(score);
  EXPECT_NEAR(*score * 1e-3, step_bytes / step_ms, 1e-9);
}

}  // namespace
}  // namespace chorus::tuning
