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
// the windows that ended. `unique`: every step's names are new (no step can be counted).
std::vector<double> run(window_meter& m, int steps, std::size_t first, bool unique = false) {
  std::vector<double> scores;
  uint64_t cycle = 0;
  for (int s = 0; s < steps; ++s)
    for (std::size_t i = s == 0 ? first : 0; i < step_buckets.size(); ++i) {
      const auto& b = step_buckets[i];
      auto at = t0 + ms(s * step_ms + b.at_ms);
      if (auto score = m.add(++cycle, b.bytes, at, ids(b.names, unique ? std::to_string(s) + "." : "")))
        scores.push_back(*score * 1e-3);  // bytes per ms
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
      EXPECT_EQ(m.cuts_by(), window_meter::rule::steps);
      ASSERT_GE(scores.size(), 12u / steps - 2) << "first bucket " << first << ", " << steps << " steps";
      for (double s : scores) EXPECT_NEAR(s, step_bytes / step_ms, 1e-9) << "first bucket " << first << ", " << steps << " steps";
    }
}

TEST(WindowMeter, NoWindowEndsInTheFirstStep) {
  // Nothing has come round before the first step ends: no window of that step, however long.
  for (std::size_t first = 0; first < step_buckets.size(); ++first) {
    window_meter m(1);
    std::vector<double> scores;
    uint64_t cycle = 0;
    for (std::size_t i = first; i < step_buckets.size(); ++i)
      if (m.add(++cycle, step_buckets[i].bytes, t0 + ms(step_buckets[i].at_ms), ids(step_buckets[i].names)))
        scores.push_back(0);
    EXPECT_TRUE(scores.empty()) << "first bucket " << first;
    EXPECT_EQ(m.cuts_by(), window_meter::rule::unknown);
  }
}

TEST(WindowMeter, WindowsOfCyclesDependOnWhereTheyBeginWhichStepsDoNot) {
  // The same job with every name new each step: no step to count, so (past 12 new names here)
  // windows of 3 cycles, the rule before steps, whose scores swing with the phase of the step.
  window_meter m(3, 12);
  auto scores = run(m, 14, 0, true);
  EXPECT_EQ(m.cuts_by(), window_meter::rule::cycles);
  ASSERT_GE(scores.size(), 10u);
  double lo = scores[0], hi = scores[0];
  for (double s : scores) lo = std::min(lo, s), hi = std::max(hi, s);
  EXPECT_GT(hi / lo, 1.5) << "cycle windows should swing with the phase of the step";
}

TEST(WindowMeter, AJobWhoseNamesNeverComeRoundIsCutByCyclesOnceEnoughNamesWereNew) {
  window_meter m(4, 20);
  int ended = 0;
  for (int c = 1; c <= 60; ++c) {
    auto score = m.add(c, 1000, t0 + ms(c), {tensor_id("t" + std::to_string(c))});
    EXPECT_EQ(m.cuts_by(), c < 20 ? window_meter::rule::unknown : window_meter::rule::cycles) << c;
    if (score) {
      ++ended;
      EXPECT_GE(c, 20) << "a window ended before 20 names were new";
      EXPECT_NEAR(*score, 1000.0 / 1e-3, 1e-6);  // 1000 bytes per ms
    }
  }
  // The first window began at cycle 1 and ends at 20 (>= 4 cycles once cycles count), then
  // one every 4 cycles: 24, 28, ..., 60.
  EXPECT_EQ(ended, 11);
  // A name that comes round after all: steps from then on.
  m.add(61, 1000, t0 + ms(61), {tensor_id("t5")});
  EXPECT_EQ(m.cuts_by(), window_meter::rule::steps);
}

TEST(WindowMeter, NamesThatStopComingRoundEndAWindowAtTheCycleCap) {
  window_meter m(1);
  run(m, 3, 0);  // names come round: steps are counted
  ASSERT_EQ(m.cuts_by(), window_meter::rule::steps);
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
  auto first = run(m, 3, 0);
  ASSERT_EQ(first.size(), 2u);
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
