// log::line_limit: at most N lines a second per site, the rest counted into the next line.
#include "runtime/core/log_limit.hpp"

#include <gtest/gtest.h>

namespace chorus::log {
namespace {

using clock = line_limit::clock;
using std::chrono::milliseconds;

TEST(LineLimit, WritesUpToTheBoundInOneSecondAndCountsTheRest) {
  line_limit limit{3};
  auto t0 = clock::time_point{} + std::chrono::hours(1);
  std::size_t held = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limit.admit(held, t0 + milliseconds(i))) << "line " << i;
    EXPECT_EQ(held, 0u);
  }
  held = 99;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.admit(held, t0 + milliseconds(100 + i)));
  EXPECT_EQ(held, 99u) << "a refused line leaves held_back alone";
  // The next window writes again and reports the five held back, once.
  ASSERT_TRUE(limit.admit(held, t0 + milliseconds(1000)));
  EXPECT_EQ(held, 5u);
  ASSERT_TRUE(limit.admit(held, t0 + milliseconds(1001)));
  EXPECT_EQ(held, 0u);
}

TEST(LineLimit, AQuietSiteIsNeverHeldBack) {
  line_limit limit{1};
  auto t = clock::time_point{} + std::chrono::hours(1);
  std::size_t held = 0;
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(limit.admit(held, t)) << "line " << i;
    EXPECT_EQ(held, 0u);
    t += milliseconds(1500);
  }
}

}  // namespace
}  // namespace chorus::log
