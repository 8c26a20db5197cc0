// Shared by the C API test files: a one-rank job initialised around each test, and a check
// that an error text contains a part.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "chorus/chorus.h"
#include "tests/support/one_rank_api.hpp"

namespace chorus::testing {

inline bool has(const char* text, const std::string& part) {
  return text && std::string(text).find(part) != std::string::npos;
}

/// chorus_init() before each test (launcher variables cleared: a job of one rank), shutdown after.
class c_api : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_launcher_env();
    ASSERT_EQ(chorus_init(), CHORUS_OK) << chorus_last_error();
  }
  void TearDown() override { chorus_shutdown(); }
};

}  // namespace chorus::testing
