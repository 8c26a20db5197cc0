// Shared by the C API test files: a completion callback that logs what it was called with (and
// releases the handle), and a check that each call of a list is rejected with an error text
// holding given words.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "tests/support/c_api_fixture.hpp"

namespace chorus::testing {

struct callback_log {
  std::atomic<int> calls{0};
  std::atomic<int> status{-1};
  std::atomic<int64_t> handle{-2};
  std::string error;
};

inline void record(int64_t handle, int status, const char* error, void* user) {
  auto* log = static_cast<callback_log*>(user);
  log->handle = handle;
  log->status = status;
  log->error = error ? error : "";
  chorus_release(handle);  // allowed inside the callback
  ++log->calls;
}

/// An enqueue call that must be rejected, and the words its error text must contain.
struct bad_case {
  std::function<int64_t()> call;
  std::vector<std::string> words;
};

/// Each call returns -1 and sets chorus_last_error() to a text with all its words.
inline void expect_each_rejected(const std::vector<bad_case>& cases) {
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i].call(), -1) << "case " << i;
    for (auto& w : cases[i].words)
      EXPECT_TRUE(has(chorus_last_error(), w)) << "case " << i << ": missing '" << w << "' in " << chorus_last_error();
  }
}

}  // namespace chorus::testing
