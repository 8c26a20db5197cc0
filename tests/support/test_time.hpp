// Test helper: the one factor by which the tests' time bounds grow in a slow build. The build
// sets CHORUS_TEST_TIME_FACTOR (tests/CMakeLists.txt: 10 where the flags hold -fsanitize=thread,
// else 1) and multiplies CTest's TIMEOUTs by it; the shared helpers (child_process, local_job,
// prometheus_server) take every deadline through deadline_in(), so a test's own bounds follow.
#pragma once

#include <chrono>

#ifndef CHORUS_TEST_TIME_FACTOR
#define CHORUS_TEST_TIME_FACTOR 1
#endif

namespace chorus::testing {

/// How many times longer than written every hard time bound of a test is in this build.
inline constexpr int time_factor = CHORUS_TEST_TIME_FACTOR;
static_assert(time_factor >= 1, "CHORUS_TEST_TIME_FACTOR must be a whole number of at least 1");

/// `limit` as this build allows it: limit * time_factor.
inline std::chrono::milliseconds scaled(std::chrono::milliseconds limit) { return limit * time_factor; }

/// The moment `limit` (scaled) from now.
inline std::chrono::steady_clock::time_point deadline_in(std::chrono::milliseconds limit) {
  return std::chrono::steady_clock::now() + scaled(limit);
}

}  // namespace chorus::testing
